// What makes perf record without build-ids (-B): only the files a target maps executable from a FUSE or network file
// system, since perf reads the build-ids of executable mappings only. A data file there (a database mmapped from NFS)
// must not cost every frame its build-id.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { stallingExecutables } from '../../src/target/mounts.js';
import { FakeProc } from '../support/fake-proc.js';

// 0:40 (0x28) is an nfs4 mount, 0:41 (0x29) a virtiofs one; the root is local.
const mountinfo = [
  '20 1 8:1 / / rw - ext4 /dev/sda1 rw',
  '40 20 0:40 / /data rw - nfs4 server:/data rw',
  '41 20 0:41 / /host rw - virtiofs host rw',
].join('\n');

test('data files mapped from a network file system do not count; executable ones do', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  const maps = (...lines: string[]) =>
    [...lines, '7f0000009000-7f000000a000 r-xp 00000000 08:01 9 /usr/lib/libc.so.6'].join('\n');
  const db = [
    '7f0000000000-7f0000001000 rw-s 00000000 00:28 12 /data/app.sqlite',
    '7f0000001000-7f0000002000 r--p 00000000 00:29 13 /host/fonts/a.ttf',
  ];
  await proc.add({ pid: 50, nspid: 1, comm: 'app', cmdline: ['app'], maps: maps(...db) });
  await writeFile(join(proc.root, '50', 'mountinfo'), mountinfo);
  assert.deepEqual(await stallingExecutables(50, { procRoot: proc.root }), []);
  const lib = '7f0000002000-7f0000003000 r-xp 00000000 00:29 14 /host/lib/libnative.so';
  await proc.add({ pid: 51, nspid: 1, comm: 'app', cmdline: ['app'], maps: maps(...db, lib) });
  await writeFile(join(proc.root, '51', 'mountinfo'), mountinfo);
  assert.deepEqual(await stallingExecutables(51, { procRoot: proc.root }), [
    { path: '/host/lib/libnative.so', fsType: 'virtiofs', executable: true },
  ]);
});

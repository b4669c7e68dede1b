// A dump folder's manifest.json: each dump appended with the earlier ones kept, names never reused, and a folder
// whose manifest.json is not a dump folder's (collect's, or not JSON) refused before any dump is taken. Dumps added at
// the same time each get a name of their own and an entry (the manifest's lock file); a lock left by a killed dump is
// taken over once stale, and one held makes the others wait.
import assert from 'node:assert/strict';
import { readdir, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  addDump,
  checkDumpFolder,
  nextDumpName,
  recordDump,
  type DumpEntry,
  type DumpManifest,
} from '../../src/dump/dump-manifest.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { tempDir } from '../support/temp.js';

async function folder(t: TestContext): Promise<OutputFolder> {
  const dir = await tempDir(t, 'dump-manifest');
  const opened = await OutputFolder.open(dir);
  t.after(() => opened.close());
  return opened;
}

const entry = (file: string): DumpEntry => ({
  file,
  type: 'mini',
  takenAt: '2026-11-24T22:00:00.000Z',
  bytes: 3,
  sha256: '0'.repeat(64),
  command: 'GenerateCoreDump3',
  target: { pid: 10, nspid: 1, commandLine: ['app'], writtenAt: '/tmp/profcpu-dump-x.core' },
  durationsMs: { dump: 1, copy: 1 },
});

test('dumps are appended, and the next name is one no file carries', async (t) => {
  const out = await folder(t);
  assert.equal(await nextDumpName(out, 'mini', 1), 'dump-mini-1-1.core');
  await out.writeFile('dump-mini-1-1.core', 'abc');
  await recordDump(out, entry('dump-mini-1-1.core'));
  assert.equal(await nextDumpName(out, 'mini', 1), 'dump-mini-1-2.core');
  await out.writeFile('dump-mini-1-2.core.partial', 'ab');
  assert.equal(await nextDumpName(out, 'mini', 1), 'dump-mini-1-3.core', 'a partial file keeps its name too');
  await recordDump(out, entry('dump-mini-1-3.core'));
  const manifest = JSON.parse(await readFile(join(out.path, 'manifest.json'), 'utf8')) as DumpManifest;
  assert.equal(manifest.kind, 'dump');
  assert.deepEqual(
    manifest.dumps.map((d) => d.file),
    ['dump-mini-1-1.core', 'dump-mini-1-3.core'],
  );
});

test('a collect folder, or a manifest.json that is not JSON, is refused', async (t) => {
  const out = await folder(t);
  await checkDumpFolder(out);
  await writeFile(join(out.path, 'manifest.json'), JSON.stringify({ manifestVersion: 1, samples: {} }));
  await assert.rejects(
    checkDumpFolder(out),
    (e) => isProfcpuError(e, 'USAGE') && /collect output folder/.test(e.message),
  );
  await writeFile(join(out.path, 'manifest.json'), '{ not json');
  await assert.rejects(
    checkDumpFolder(out),
    (e) => isProfcpuError(e, 'USAGE') && /cannot be read as JSON/.test(e.message),
  );
});

test('eight dumps added at once: eight names, eight entries, each file its own, no lock or incoming file left', async (t) => {
  const out = await folder(t);
  const ids = [...Array(8).keys()];
  await Promise.all(ids.map((i) => out.writeFile(`dump-incoming-${i}.core`, `dump ${i}`)));
  const added = await Promise.all(
    ids.map((i) => {
      const { file: _file, ...rest } = entry('');
      return addDump(out, `dump-incoming-${i}.core`, { ...rest, sha256: String(i).repeat(64) });
    }),
  );
  const manifest = JSON.parse(await readFile(join(out.path, 'manifest.json'), 'utf8')) as DumpManifest;
  assert.equal(manifest.dumps.length, 8, 'no entry lost');
  assert.deepEqual(new Set(added.map((a) => a.file)), new Set(ids.map((i) => `dump-mini-1-${i + 1}.core`)));
  for (const dump of manifest.dumps) {
    const i = Number(dump.sha256[0]);
    assert.equal(await readFile(join(out.path, dump.file), 'utf8'), `dump ${i}`, `${dump.file} is dump ${i}`);
  }
  assert.deepEqual((await readdir(out.path)).sort(), [...added.map((a) => a.file), 'manifest.json'].sort());
});

test('a lock held by another dump is waited for; a stale one (a killed dump’s) is taken over', async (t) => {
  const out = await folder(t);
  const lock = join(out.path, 'manifest.json.lock');
  await writeFile(lock, '');
  let done = false;
  const recorded = recordDump(out, entry('a.core')).then(() => (done = true));
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(done, false, 'waits while the lock is held');
  await rm(lock);
  await recorded;
  await writeFile(lock, '');
  const old = new Date(Date.now() - 3600_000);
  await utimes(lock, old, old);
  await recordDump(out, entry('b.core'));
  const manifest = JSON.parse(await readFile(join(out.path, 'manifest.json'), 'utf8')) as DumpManifest;
  assert.deepEqual(
    manifest.dumps.map((d) => d.file),
    ['a.core', 'b.core'],
  );
  assert.deepEqual(await readdir(out.path), ['manifest.json']);
});

// fetch-dump.ts on a folder standing in for the target's temp folder: the copy is exact (SHA-256, holes kept as
// holes), and a copy past its deadline, interrupted, or of a file that is not the target user's ends with a clear
// error, no partial file in the output folder and the target's file removed.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fetchDump } from '../../src/dump/fetch-dump.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { RootedTree } from '../../src/files/rooted.js';
import { needRoot } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

async function scene(t: TestContext, content: Buffer) {
  const base = await tempDir(t, 'fetch-dump');
  const targetDir = join(base, 'target-tmp');
  const outDir = join(base, 'out');
  await mkdir(targetDir);
  await writeFile(join(targetDir, 'd.core'), content);
  const tree = await RootedTree.open(targetDir);
  const folder = await tree.lookup('.', 'directory');
  const out = await OutputFolder.open(outDir, { create: true });
  t.after(async () => {
    await folder.close();
    await tree.close();
    await out.close();
  });
  return { targetDir, outDir, folder, out, uid: process.getuid!() };
}

/** 3 MiB of data, 2 MiB of zeros (two whole chunks: a hole in the copy), 1 MiB of data. */
function dumpBytes(): Buffer {
  const data = Buffer.alloc(6 << 20);
  for (let i = 0; i < 3 << 20; i++) data[i] = (i * 31) & 0xff || 1;
  data.fill(7, 5 << 20);
  return data;
}

test('the copy is byte for byte, its zero chunks left as holes; the target’s file is removed', async (t) => {
  const bytes = dumpBytes();
  const s = await scene(t, bytes);
  const seen: number[] = [];
  const got = await fetchDump(s.folder, 'd.core', s.out, 'dump.core', {
    uid: s.uid,
    onProgress: (copied) => seen.push(copied),
  });
  assert.equal(got.bytes, bytes.length);
  assert.equal(got.written, 4 << 20, 'the two zero chunks are not written');
  assert.equal(got.sha256, createHash('sha256').update(bytes).digest('hex'));
  assert.deepEqual(await readFile(join(s.outDir, 'dump.core')), bytes);
  assert.ok((await stat(join(s.outDir, 'dump.core'))).blocks * 512 < bytes.length, 'the copy is sparse');
  assert.equal(seen.at(-1), bytes.length, 'progress reaches the end');
  assert.deepEqual(await readdir(s.targetDir), []);
  assert.deepEqual(await readdir(s.outDir), ['dump.core']);
});

test('past the deadline: IO error, no partial file, the target’s file removed', async (t) => {
  const s = await scene(t, Buffer.alloc(64 << 20, 1));
  await assert.rejects(
    fetchDump(s.folder, 'd.core', s.out, 'dump.core', { uid: s.uid, limits: { timeoutMs: 1 } }),
    (e) => isProfcpuError(e, 'IO') && /no answer within 1 ms/.test(e.message),
  );
  assert.deepEqual(await readdir(s.outDir), []);
  assert.deepEqual(await readdir(s.targetDir), []);
});

test('interrupted (Ctrl-C): ABORTED, no partial file', async (t) => {
  const s = await scene(t, Buffer.alloc(64 << 20, 1));
  const abort = new AbortController();
  await assert.rejects(
    fetchDump(s.folder, 'd.core', s.out, 'dump.core', {
      uid: s.uid,
      signal: abort.signal,
      onProgress: (copied) => copied >= 2 << 20 && abort.abort(),
    }),
    (e) => isProfcpuError(e, 'ABORTED'),
  );
  assert.deepEqual(await readdir(s.outDir), []);
});

test('another user’s file is refused unread', async (t) => {
  if (!needRoot(t)) return;
  const s = await scene(t, Buffer.from('not the target’s'));
  await chown(join(s.targetDir, 'd.core'), 12345, 12345);
  await assert.rejects(
    fetchDump(s.folder, 'd.core', s.out, 'dump.core', { uid: 0 }),
    (e) => isProfcpuError(e, 'BAD_INPUT') && /owned by uid 12345/.test(e.message),
  );
  assert.deepEqual(await readdir(s.outDir), []);
  assert.deepEqual(await readdir(s.targetDir), []);
});

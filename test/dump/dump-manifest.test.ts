// A dump folder's manifest.json: each dump appended with the earlier ones kept, names never reused, and a folder
// whose manifest.json is not a dump folder's (collect's, or not JSON) refused before any dump is taken.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  checkDumpFolder,
  nextDumpName,
  recordDump,
  type DumpEntry,
  type DumpManifest,
} from '../../src/dump/dump-manifest.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';

async function folder(t: TestContext): Promise<OutputFolder> {
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-dump-manifest-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
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

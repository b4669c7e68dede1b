// The watch folder's index and retention: the oldest runs go first, by count and by bytes on disk, the newest stays;
// index.json survives a restart of the watch (a run it left under way becomes discarded); index.html escapes what
// came from the target and links only inside each run's folder.
import assert from 'node:assert/strict';
import { mkdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../src/files/output-folder.js';
import { needRoot } from '../support/requirements.js';
import { folderBytes, indexHtml, RunIndex, type RunEntry } from '../../src/watch/run-index.js';
import { tempDir } from '../support/temp.js';

function entry(id: string, bytes: number, extra: Partial<RunEntry> = {}): RunEntry {
  return {
    id,
    rule: 'hot',
    action: 'profile',
    target: { pid: 42, comm: 'Shop', commandLine: 'dotnet Shop.dll' },
    trigger: { type: 'cpu', reason: 'CPU 93% of a core over 30 s', figures: { cpuPercent: 93 } },
    startedAt: '2026-11-24T22:00:00.000Z',
    status: 'done',
    bytes,
    ...extra,
  };
}

async function run(dir: string, id: string, kib: number): Promise<number> {
  await mkdir(join(dir, id, 'target'), { recursive: true });
  await writeFile(join(dir, id, 'perf.data'), Buffer.alloc(kib * 1024, 1));
  await writeFile(join(dir, id, 'target', 'maps'), 'x');
  return folderBytes(join(dir, id));
}

test('retention removes the oldest runs first, by count then by bytes, and always keeps the newest', async (t) => {
  const dir = await tempDir(t, 'watch-index', '/var/tmp');
  const folder = await OutputFolder.open(dir);
  t.after(() => folder.close());
  const index = await RunIndex.open(folder);
  for (const [id, kib] of [
    ['r1', 64],
    ['r2', 64],
    ['r3', 64],
    ['r4', 512],
  ] as const)
    index.add(entry(id, await run(dir, id, kib)));
  const r1 = index.entries[0]!.bytes!;
  assert.ok(r1 >= 64 * 1024 && r1 < 80 * 1024, `bytes on disk: ${r1}`);

  assert.deepEqual(await index.applyRetention({ maxRuns: 3, maxBytes: 1 << 30 }, new Date(0)), ['r1']);
  assert.equal(index.entries[0]!.removedAt, new Date(0).toISOString());
  await assert.rejects(stat(join(dir, 'r1')), /ENOENT/);
  // 512 KiB alone is over 300 KiB: everything older goes, the newest stays.
  assert.deepEqual(await index.applyRetention({ maxRuns: 3, maxBytes: 300 * 1024 }, new Date(0)), ['r2', 'r3']);
  assert.ok((await stat(join(dir, 'r4', 'perf.data'))).isFile());

  await index.save();
  const saved = JSON.parse(await readFile(join(dir, 'index.json'), 'utf8')) as { runs: RunEntry[] };
  assert.deepEqual(
    saved.runs.map((r) => [r.id, r.removedAt !== undefined]),
    [
      ['r1', true],
      ['r2', true],
      ['r3', true],
      ['r4', false],
    ],
  );
  const html = await readFile(join(dir, 'index.html'), 'utf8');
  assert.match(html, /removed 1970-01-01T00:00:00.000Z/);
});

test('a later watch carries on from index.json; a run left under way is discarded, entries with bad ids dropped', async (t) => {
  const dir = await tempDir(t, 'watch-index', '/var/tmp');
  await writeFile(
    join(dir, 'index.json'),
    JSON.stringify({
      runs: [
        entry('old', 10),
        entry('cut', 10, { status: 'running' }),
        entry('../../etc', 10),
        entry('index.json', 10),
        entry('triggers', 10),
        { id: 3 },
      ],
    }),
  );
  const folder = await OutputFolder.open(dir);
  t.after(() => folder.close());
  const index = await RunIndex.open(folder);
  assert.deepEqual(
    index.entries.map((e) => [e.id, e.status]),
    [
      ['old', 'done'],
      ['cut', 'discarded'],
    ],
  );
});

test('index.json planted as a link is replaced, not written through', async (t) => {
  const dir = await tempDir(t, 'watch-index', '/var/tmp');
  const outside = join(dir, '..', `profcpu-watch-outside-${process.pid}`);
  await writeFile(outside, 'untouched');
  t.after(() => rm(outside, { force: true }));
  await symlink(outside, join(dir, 'index.json'));
  await symlink(outside, join(dir, '.index.html.tmp'));
  const folder = await OutputFolder.open(dir);
  t.after(() => folder.close());
  const index = await RunIndex.open(folder);
  index.add(entry('r1', 1));
  await index.save();
  assert.equal(await readFile(outside, 'utf8'), 'untouched');
  assert.match(await readFile(join(dir, 'index.json'), 'utf8'), /"r1"/);
});

test('the index files are given to the owner asked for (the launcher’s user)', async (t) => {
  if (!needRoot(t)) return;
  const dir = await tempDir(t, 'watch-index', '/var/tmp');
  const folder = await OutputFolder.open(dir);
  t.after(() => folder.close());
  const index = await RunIndex.open(folder, { uid: 4321, gid: 4322 });
  index.add(entry('r1', 1));
  await index.save();
  for (const name of ['index.json', 'index.html']) {
    const s = await stat(join(dir, name));
    assert.deepEqual([s.uid, s.gid], [4321, 4322], name);
  }
});

test('index.html escapes the target’s names and links only inside each run’s folder', () => {
  const html = indexHtml([
    entry('r1', 1, {
      target: { pid: 7, comm: '<script>alert(1)</script>', commandLine: 'x' },
      trigger: { type: 'cpu', reason: 'CPU "99%"\x1b[31m', figures: {} },
      links: { 'flame graph': 'r1/flamegraph.svg', evil: '../../etc/passwd', other: 'r2/flamegraph.svg' },
    }),
  ]);
  assert.ok(!html.includes('<script>'), html);
  assert.match(html, /&lt;script&gt;alert\(1\)&lt;\/script&gt;/);
  assert.match(html, /CPU &quot;99%&quot;\\x1b\[31m/);
  assert.match(html, /<a href="r1\/flamegraph.svg">flame graph<\/a>/);
  assert.ok(!html.includes('passwd') && !html.includes('r2/'), 'no link outside the run');
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { appendFile, mkdtemp, readFile, rm, stat, symlink, truncate, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { inspectProcess } from '../../src/target/inspect.js';
import { TargetSnapshotter } from '../../src/collect/snapshot.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { coreclrMaps, FakeProc } from '../support/fake-proc.js';

async function setup() {
  const proc = await FakeProc.create();
  await proc.add({
    pid: 4242,
    nspid: 1,
    comm: 'dotnet',
    cmdline: ['dotnet', 'Shop.dll'],
    maps: coreclrMaps,
    files: { '/tmp/perf-1.map': 'a 1 First\n' },
  });
  const out = await mkdtemp(join(tmpdir(), 'profcpu-snapshot-'));
  const target = await inspectProcess(4242, { procRoot: proc.root });
  const folder = await OutputFolder.open(out);
  const files = await TargetFiles.open(4242, { procRoot: proc.root });
  const snapshotter = new TargetSnapshotter(folder, files, target, { procRoot: proc.root });
  return {
    proc,
    out,
    snapshotter,
    read: (file: string) => readFile(join(out, file), 'utf8'),
    dispose: async () => {
      await files.close();
      await folder.close();
      await proc.dispose();
      await rm(out, { recursive: true, force: true });
    },
  };
}

test('snapshots follow a growing perf map and keep the last copy once the target is gone', async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  await s.snapshotter.refresh();
  assert.equal(await s.read(layout.perfMap(1)), 'a 1 First\n');
  assert.equal(await s.read(layout.procMaps), coreclrMaps);

  await s.proc.writeInRoot(4242, '/tmp/perf-1.map', 'a 1 First\nb 1 Second\n');
  await s.snapshotter.refresh();
  assert.equal(await s.read(layout.perfMap(1)), 'a 1 First\nb 1 Second\n');

  await s.proc.remove(4242);
  await s.snapshotter.refresh();
  assert.equal(await s.read(layout.perfMap(1)), 'a 1 First\nb 1 Second\n', 'the copy from before the exit is kept');
  assert.equal(await s.read(layout.procMaps), coreclrMaps);
  const report = s.snapshotter.report();
  assert.equal(report.perfMap.copies, 2);
  assert.match(report.perfMap.lastMiss ?? '', /not present/);
  assert.equal(report.jitDump.copies, 0);
});

test('a map that shrank (rewritten or truncated by a dying target) does not replace the copy', async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  await s.proc.writeInRoot(4242, '/tmp/perf-1.map', 'a 1 First\nb 1 Second\n');
  await s.snapshotter.refresh();
  await s.proc.writeInRoot(4242, '/tmp/perf-1.map', 'a 1');
  await s.snapshotter.refresh();
  assert.equal(await s.read(layout.perfMap(1)), 'a 1 First\nb 1 Second\n');
  assert.match(s.snapshotter.report().perfMap.lastMiss ?? '', /shrank/);
});

test('an unchanged map is not copied again', async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  const path = join(s.proc.root, '4242/root/tmp/perf-1.map');
  await utimes(path, 1_000_000, 1_000_000);
  await s.snapshotter.refresh();
  await s.snapshotter.refresh();
  assert.equal(s.snapshotter.report().perfMap.copies, 1);
});

test('a sparse map past the cap is copied up to the cap, holes kept as holes, with one warning', async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  const path = join(s.proc.root, '4242/root/tmp/perf-1.map');
  // 1.5 GB of hole, then a line.
  await truncate(path, 1500 << 20);
  await appendFile(path, '7f0000001000 10 Sparse::Method\n');
  const warnings: string[] = [];
  const folder = await OutputFolder.open(s.out);
  const files = await TargetFiles.open(4242, { procRoot: s.proc.root });
  t.after(async () => {
    await files.close();
    await folder.close();
  });
  const target = await inspectProcess(4242, { procRoot: s.proc.root });
  const capped = new TargetSnapshotter(folder, files, target, { procRoot: s.proc.root, maxBytes: 64 << 20 }, (m) =>
    warnings.push(m),
  );
  await capped.refresh();
  await capped.refresh();
  const copy = await stat(join(s.out, layout.perfMap(1)));
  assert.equal(copy.size, 64 << 20);
  // The map's first line lies in the first 1 MiB chunk, written whole; the rest is hole.
  assert.ok(copy.blocks * 512 <= 1 << 20, `${copy.blocks * 512} bytes on disk`);
  assert.equal(warnings.length, 1, warnings.join('\n'));
  assert.match(warnings[0]!, /snapshot limit/);
  assert.equal(capped.report().perfMap.capped, true);
});

test('a growing map is appended to, and the copy equals the source after every refresh', async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  const path = join(s.proc.root, '4242/root/tmp/perf-1.map');
  let expected = 'a 1 First\n';
  for (let i = 0; i < 20; i++) {
    expected += `${(0x1000 + i).toString(16)} 10 Method${i}${'x'.repeat(i * 500)}\n`;
    await appendFile(path, expected.slice(expected.lastIndexOf('\n', expected.length - 2) + 1));
    await s.snapshotter.refresh();
    assert.equal(await s.read(layout.perfMap(1)), expected);
  }
  // Rewritten in place (same size or larger, other bytes): copied whole again.
  const rewritten = expected.replace(/Method/g, 'Rewrote');
  await s.proc.writeInRoot(4242, '/tmp/perf-1.map', rewritten);
  await s.snapshotter.refresh();
  assert.equal(await s.read(layout.perfMap(1)), rewritten);
});

test('a FIFO, a device or a link out of the target is never copied', { timeout: 10_000 }, async (t) => {
  const s = await setup();
  t.after(() => s.dispose());
  const dir = join(s.proc.root, '4242/root/tmp');
  await rm(join(dir, 'perf-1.map'));
  execFileSync('mkfifo', [join(dir, 'perf-1.map')]);
  await symlink(join(s.out, '..'), join(dir, 'jit-1.dump'));
  await s.snapshotter.refresh();
  const report = s.snapshotter.report();
  assert.match(report.perfMap.lastMiss ?? '', /refused: a FIFO/);
  assert.equal(report.perfMap.copies, 0);
  assert.equal(report.jitDump.copies, 0);
  await assert.rejects(stat(join(s.out, layout.perfMap(1))), { code: 'ENOENT' });
});

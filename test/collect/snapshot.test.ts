import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, utimes } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/bundle/layout.js';
import { inspectProcess } from '../../src/target/inspect.js';
import { TargetSnapshotter } from '../../src/collect/snapshot.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { coreclrMaps, FakeProc } from '../target/fake-proc.js';

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

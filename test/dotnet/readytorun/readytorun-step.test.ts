// The readytorun collect step against a target whose assemblies are not all what they claim: it reads the target's
// files only inside the target's root (a link to an assembly of this machine is not followed out), refuses a file
// that is no image with a warning, and names the real one.
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readdir, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import type { StepContext } from '../../../src/step/step.js';
import { OutputFolder } from '../../../src/files/output-folder.js';
import { readReadyToRunIndex } from '../../../src/dotnet/readytorun/readytorun-store.js';
import { readyToRunStep } from '../../../src/dotnet/readytorun/readytorun-step.js';
import type { TargetInfo } from '../../../src/target/inspect.js';
import { TargetFiles } from '../../../src/target/target-files.js';
import { sharedFramework } from '../../support/dotnet-app.js';
import { FakeProc } from '../../support/fake-proc.js';
import { need } from '../../support/requirements.js';

test('links out of the target are not followed, a file that is no image is refused, the real one is named', async (t) => {
  const framework = sharedFramework();
  if (!need(t, framework !== undefined, 'the .NET shared framework (dotnet)')) return;
  const host = join(framework!, 'System.Private.CoreLib.dll');
  const maps = ['good', 'escape', 'climb', 'junk']
    .map((name, i) => `7f00${i}0000000-7f00${i}0100000 r-xp 00000000 fe:00 ${i + 1} /app/${name}.dll`)
    .join('\n');
  const proc = await FakeProc.create();
  await proc.add({ pid: 77, nspid: 1, comm: 'app', cmdline: ['app'], maps: `${maps}\n` });
  const root = join(proc.root, '77', 'root');
  await mkdir(join(root, 'app'), { recursive: true });
  await copyFile(join(framework!, 'System.Threading.dll'), join(root, 'app', 'good.dll'));
  await symlink(host, join(root, 'app', 'escape.dll'));
  await symlink(`../../../../../../../..${host}`, join(root, 'app', 'climb.dll'));
  await writeFile(join(root, 'app', 'junk.dll'), Buffer.alloc(4096, 0x4d));
  const out = await mkdtemp(join(tmpdir(), 'profcpu-r2r-step-'));
  const files = await TargetFiles.open(77, { procRoot: proc.root });
  t.after(async () => {
    await files.close();
    await proc.dispose();
    await rm(out, { recursive: true, force: true });
  });
  const warnings: string[] = [];
  const context: StepContext = {
    target: { pid: 77 } as TargetInfo,
    dir: out,
    perfPath: 'perf',
    procRoot: proc.root,
    files,
    signal: new AbortController().signal,
    warn: (w) => warnings.push(w),
    progress: () => {},
  };
  const step = readyToRunStep();
  const report = await step.beforeRecording!(context);
  assert.equal(report?.['images'], 1);
  assert.deepEqual(
    (report?.['skipped'] as { path: string }[]).map((s) => s.path),
    ['/app/climb.dll', '/app/escape.dll', '/app/junk.dll'],
  );
  assert.equal(warnings.length, 3);
  const folder = await OutputFolder.open(out);
  try {
    const index = await readReadyToRunIndex(folder);
    assert.deepEqual(
      index.map((e) => [e.path, e.assembly]),
      [['/app/good.dll', 'System.Threading']],
    );
    assert.deepEqual(await readdir(join(out, 'target', 'readytorun')), [`${index[0]!.mvid}.map.gz`]);
  } finally {
    await folder.close();
  }
  // The second pass reads nothing new and keeps the totals.
  assert.deepEqual(await step.afterRecording!(context), report);
});

// End to end: the .NET fixture app with nothing set in its environment, recorded from a sidecar joined to its PID
// namespace. Collect reads the runtime's stubs from its memory (target/runtime-stubs.json), and the frames that would
// otherwise be `[.NET stub, not in perf map]` (the same folder post-processed without the table) are named
// `[stub: <kind>]`: each such distinct frame is either named now or still unlogged, and some are named.
import assert from 'node:assert/strict';
import { createReadStream, existsSync } from 'node:fs';
import { cp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { foldStream } from '../../src/stacks/fold.js';
import { loadFolderResolver } from '../../src/dotnet/naming/folder-resolver.js';
import { canRecord, needCommand, needDotnet } from '../support/requirements.js';
import { readOutputs, recordFixtureFromSidecar, sidecarWorkDir } from './fixture-in-sidecar.js';
import { tempDir } from '../support/temp.js';

test('nothing set in the app: stubs are named by kind from the runtime’s memory', { timeout: 300_000 }, async (t) => {
  if (!canRecord(t) || !needCommand(t, 'unshare', 'util-linux') || !needDotnet(t)) return;
  const work = await sidecarWorkDir();
  t.after(() => rm(work, { recursive: true, force: true }));
  const recording = await recordFixtureFromSidecar({ env: {}, work, seconds: 8 });
  t.after(() => recording.target.kill());
  assert.equal(recording.exitCode, 0, recording.output);
  const { folded } = await readOutputs(recording.dir);
  const manifest = JSON.parse(await readFile(join(recording.dir, layout.manifest), 'utf8')) as {
    collect: { steps: Record<string, { ranges?: number; passes?: unknown[] }> };
  };
  const step = manifest.collect.steps['runtime-stubs'];
  assert.ok((step?.ranges ?? 0) > 0, JSON.stringify(step));
  assert.ok(existsSync(join(recording.dir, layout.runtimeStubs)));

  // perf's own text, from a copy post-processed without a resolver; then folded with the folder's resolver, with
  // and without the stub table.
  const plain = await tempDir(t, 'stubs-plain');
  await cp(recording.dir, plain, { recursive: true });
  await postprocess(plain, { resolver: undefined, tarball: false, force: true });
  const script = join(plain, layout.perfScript);
  const withTable = await loadFolderResolver(recording.dir);
  await foldStream(createReadStream(script), {}, undefined, withTable);
  await rm(join(plain, layout.runtimeStubs));
  const withoutTable = await loadFolderResolver(plain);
  await foldStream(createReadStream(script), {}, undefined, withoutTable);
  const before = withoutTable!.stats;
  const after = withTable!.stats;
  t.diagnostic(
    `distinct stub frames: ${before.unloggedStubs} unlogged without the table; with it ${after.stubsFromMemory} ` +
      `named, ${after.unloggedStubs} unlogged; ${JSON.stringify(step)}`,
  );
  assert.equal(before.stubsFromMemory, 0);
  assert.ok(after.stubsFromMemory > 0, 'some stub frames are named from memory');
  assert.equal(after.stubsFromMemory + after.unloggedStubs, before.unloggedStubs);
  assert.match(folded, /\[stub: [a-z ]+\]/);
});

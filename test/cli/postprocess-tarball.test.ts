// `profcpu postprocess prof.tar.gz`: the tarball profcpu wrote of a real recording, sent elsewhere, round-trips. It is
// unpacked into a new folder (next to it, named as its top folder, or --out DIR) and gives the same folded stacks as
// post-processing the original folder, with either engine; `-dir prof.tar.gz` does the same as the argument.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { canRecord, have, isRoot } from '../support/requirements.js';
import { burnFunctions, keepPerfMap, recordNode } from '../postprocess/recording.js';

const deadline = { timeout: 180_000 };

let root: string;
/** The folder collect would leave, post-processed once (so its prof.tar.gz exists): never changed afterwards. */
let original: string | undefined;
before(async () => {
  root = await mkdtemp('/var/tmp/profcpu-tarball-input-');
  if (!isRoot() || !have('perf')) return;
  const dir = join(root, '15-02-11_2026-11-22');
  await keepPerfMap(dir, await recordNode(dir));
  const run = await runCli(['postprocess', '--dir', dir, '-q']);
  assert.equal(run.exitCode, 0, String(run.all));
  original = dir;
});
after(() => rm(root, { recursive: true, force: true }));

function recorded(t: TestContext): string | undefined {
  if (!canRecord(t)) return undefined;
  assert.ok(original, 'the recording was not made');
  return original;
}

/** A fresh folder holding only a copy of the original's prof.tar.gz. */
async function received(name: string): Promise<{ dir: string; archive: string }> {
  const dir = join(root, name);
  await mkdir(dir);
  const archive = join(dir, layout.tarball);
  await cp(join(original!, layout.tarball), archive);
  return { dir, archive };
}

const folded = (dir: string) => readFile(join(dir, layout.foldedStacks), 'utf8');

test(
  'prof.tar.gz unpacked next to itself and post-processed: same folded stacks as the folder',
  deadline,
  async (t) => {
    const dir = recorded(t);
    if (!dir) return;
    const sent = await received('sent');
    const run = await runCli(['postprocess', layout.tarball], { cwd: sent.dir });
    assert.equal(run.exitCode, 0, String(run.all));
    const unpacked = join(sent.dir, basename(dir));
    assert.match(String(run.stderr), new RegExp(`unpacked ${layout.tarball} into ${unpacked} \\(`));
    assert.match(String(run.stdout), new RegExp(`${basename(dir)}/${layout.flamegraphSvg}`));
    assert.deepEqual((await readdir(sent.dir)).sort(), [basename(dir), layout.tarball].sort());
    assert.equal(await folded(unpacked), await folded(dir));
    for (const name of burnFunctions) assert.match(await folded(unpacked), new RegExp(name));
    // The raw data came through unchanged.
    for (const name of [layout.perfData, layout.procMaps])
      assert.deepEqual(await readFile(join(unpacked, name)), await readFile(join(dir, name)), name);

    // Again: the folder is there, so it is not unpacked over; the message says what to run instead.
    const again = await runCli(['postprocess', layout.tarball], { cwd: sent.dir });
    assert.equal(again.exitCode, 1);
    assert.match(String(again.stderr), /already exists[\s\S]*fix: Post-process that folder/);
  },
);

test('-dir prof.tar.gz --out DIR, with the perf engine too: same folded stacks', deadline, async (t) => {
  const dir = recorded(t);
  if (!dir) return;
  const sent = await received('sent-out');
  const out = join(root, 'chosen');
  const run = await runCli(['postprocess', '-dir', sent.archive, '--out', out, '-q']);
  assert.equal(run.exitCode, 0, String(run.all));
  assert.equal(await folded(out), await folded(dir));
  assert.deepEqual(await readdir(sent.dir), [layout.tarball]);

  // perf reads the unpacked folder as it reads the original (its kept binaries, its perf map).
  const perfOriginal = join(root, 'perf-original');
  await cp(dir, perfOriginal, { recursive: true });
  for (const folder of [perfOriginal, out]) {
    const perf = await runCli(['postprocess', folder, '--engine', 'perf', '-q']);
    assert.equal(perf.exitCode, 0, String(perf.all));
  }
  assert.equal(await folded(out), await folded(perfOriginal));
});

// The two engines of postprocess on the same recordings: perf script, and profcpu's own perf.data reader. Each case
// post-processes one folder with both and compares the folded stacks line for line: they must be the same.
import assert from 'node:assert/strict';
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { execa } from 'execa';
import { layout } from '../../src/bundle/layout.js';
import { postprocess, type Engine } from '../../src/postprocess/postprocess.js';
import { needCommand, needRoot } from '../support/requirements.js';
import { burnFunctions, keepPerfMap, recordNode } from './recording.js';

/** Folded stacks of `dir` post-processed by `engine` (in a copy of the folder, so both start alike). */
async function folded(t: TestContext, dir: string, engine: Engine): Promise<Map<string, number>> {
  const copy = await mkdtemp(join(tmpdir(), `profcpu-engine-${engine}-`));
  t.after(() => rm(copy, { recursive: true, force: true }));
  await cp(dir, copy, { recursive: true });
  await postprocess(copy, { engine, tarball: false });
  const stacks = new Map<string, number>();
  for (const line of (await readFile(join(copy, layout.foldedStacks), 'utf8')).split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (m) stacks.set(m[1]!, Number(m[2]));
  }
  return stacks;
}

/** Stacks (with their counts) found by one engine and not the other. */
function differences(perf: Map<string, number>, native: Map<string, number>) {
  const onlyPerf = [...perf].filter(([stack, n]) => native.get(stack) !== n);
  const onlyNative = [...native].filter(([stack, n]) => perf.get(stack) !== n);
  return { onlyPerf, onlyNative };
}

test('a Node program with a perf map (JIT frames, C++ frames perf demangles): the same folded stacks', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf')) return;
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-engines-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const recording = await recordNode(dir, 1500);
  await keepPerfMap(dir, recording);

  const perf = await folded(t, dir, 'perf');
  const native = await folded(t, dir, 'native');
  const text = [...native.keys()].join('\n');
  for (const name of burnFunctions) assert.ok(text.includes(name), `native engine lost ${name}`);
  const { onlyPerf, onlyNative } = differences(perf, native);
  assert.deepEqual(onlyNative.slice(0, 5), []);
  assert.deepEqual(onlyPerf.slice(0, 5), []);
});

test('a kernel-heavy native program: the same folded stacks from both engines', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf')) return;
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-engines-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const load = 'dd if=/dev/zero of=/dev/null bs=4k count=300000; dd if=/dev/urandom of=/dev/null bs=64k count=1500';
  await execa('perf', [
    'record',
    '-F',
    '499',
    '-g',
    '-e',
    'cpu-clock',
    '-o',
    join(dir, 'perf.data'),
    '--',
    'sh',
    '-c',
    load,
  ]);
  const perf = await folded(t, dir, 'perf');
  const native = await folded(t, dir, 'native');
  const { onlyPerf, onlyNative } = differences(perf, native);
  assert.deepEqual(onlyNative.slice(0, 5), []);
  assert.deepEqual(onlyPerf.slice(0, 5), []);
  assert.ok(perf.size > 0);
});

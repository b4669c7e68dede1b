// The two engines of postprocess on the same recordings: perf script, and profcpu's own perf.data reader. Each case
// post-processes one folder with both and compares the folded stacks line for line: they must be the same, but for
// the two gaps known today, which rare samples hit: a C++ name the demangler leaves mangled (lambdas, local names:
// the native stack holds `_Z...`), a PLT entry perf names `x@plt` (the native engine leaves it unnamed). Those stacks
// are counted in the test's diagnostics.
import assert from 'node:assert/strict';
import { cp, mkdir, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, type TestContext } from 'node:test';
import { execa } from 'execa';
import { layout } from '../../src/bundle/layout.js';
import type { StepContext } from '../../src/collect/steps.js';
import { vdsoStep } from '../../src/collect/vdso-step.js';
import { postprocess, type Engine } from '../../src/postprocess/postprocess.js';
import { buildNativeLibIfPossible, needNativeLib } from '../fixtures/native-lib/build.js';
import { runCli } from '../support/cli.js';
import { need, needCommand, needRoot } from '../support/requirements.js';
import { startDotnetApp } from '../support/dotnet-app.js';
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

/** A frame the native engine leaves as it is today: a C++ name left mangled, an entry of a PLT (`[dso]`). */
const gapFrame = /^(_Z|\[[^\]]+\]$)/;

/** The stacks only the native engine folds, each with the perf-only stacks it matches but for gap frames. */
function explainGaps(onlyPerf: [string, number][], onlyNative: [string, number][]) {
  const perfFrames = onlyPerf.map(([stack]) => stack.split(';'));
  const matched = new Set<number>();
  const unexplained: string[] = [];
  for (const [stack] of onlyNative) {
    const frames = stack.split(';');
    const gaps = frames.filter((frame) => gapFrame.test(frame)).length;
    const matches = perfFrames.flatMap((other, i) =>
      gaps > 0 && other.length === frames.length && frames.every((f, j) => f === other[j] || gapFrame.test(f))
        ? [i]
        : [],
    );
    if (matches.length === 0) unexplained.push(stack);
    for (const i of matches) matched.add(i);
  }
  const unmatchedPerf = onlyPerf.filter((_, i) => !matched.has(i)).map(([stack]) => stack);
  return { unexplained, unmatchedPerf };
}

/** Both engines on `dir`: the same folded stacks, line for line, but for the known gaps, and not nothing. */
async function assertSameFold(t: TestContext, dir: string): Promise<Map<string, number>> {
  const perf = await folded(t, dir, 'perf');
  const native = await folded(t, dir, 'native');
  const { onlyPerf, onlyNative } = differences(perf, native);
  const { unexplained, unmatchedPerf } = explainGaps(onlyPerf, onlyNative);
  assert.deepEqual(unexplained.slice(0, 3), [], `${unexplained.length} stacks only the native engine folds`);
  assert.deepEqual(unmatchedPerf.slice(0, 3), [], `${unmatchedPerf.length} stacks only perf folds`);
  const samples = (list: Iterable<[string, number]>) => [...list].reduce((sum, [, n]) => sum + n, 0);
  assert.equal(samples(native), samples(perf), 'both engines fold the same number of samples');
  t.diagnostic(`${perf.size} stacks, ${samples(perf)} samples; ${samples(onlyNative)} samples differ by a gap frame`);
  assert.ok(native.size > 0);
  return native;
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

  const native = await assertSameFold(t, dir);
  const text = [...native.keys()].join('\n');
  for (const name of burnFunctions) assert.ok(text.includes(name), `native engine lost ${name}`);
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
  await assertSameFold(t, dir);
});

test('a native program whose stripped library has its debug file beside it: the same folded stacks', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf')) return;
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-engines-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const lib = needNativeLib(t, buildNativeLibIfPossible(join(dir, 'lib')));
  if (!lib) return;
  const out = join(dir, 'out');
  await execa('mkdir', ['-p', out]);
  await execa('perf', [
    'record',
    '-F',
    '499',
    '-g',
    '-e',
    'cpu-clock',
    '-o',
    join(out, 'perf.data'),
    '--',
    lib.program,
    '2',
  ]);
  const native = await assertSameFold(t, out);
  const text = [...native.keys()].join('\n');
  // Named from the debug file only (the library is stripped).
  assert.ok(
    lib.hotFunctions.some((name) => text.includes(name)),
    text,
  );
});

test('a .NET app recorded by profcpu collect (kept binaries, perf map, jitdump): the same folded stacks', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf') || !needCommand(t, 'dotnet', 'dotnet-sdk')) return;
  const work = await mkdtemp(join(tmpdir(), 'profcpu-engines-'));
  t.after(() => rm(work, { recursive: true, force: true }));
  const app = await startDotnetApp({ seconds: 60 });
  t.after(() => app.kill());
  const out = join(work, 'out');
  const run = await runCli(['collect', '--pid', String(app.pid), '--duration', '3', '--output', out], { cwd: work });
  if (!need(t, run.exitCode === 0, `a working collect (${String(run.all).slice(-300)})`)) return;
  await app.kill();
  await assertSameFold(t, out);
});

const clockLoop = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/vdso-clock/clockloop.c');

// perf names [vdso] frames from its cache's copy of the recorded vdso when perf.data has its build-id (a plain perf
// record, which fills the cache), else from its own vdso (`-N --buildid-mmap`, as collect records: no build-id for
// the vdso, which is no file). The native engine must name them alike.
for (const [how, flags, keepVdso] of [
  ['a plain perf record', [], false],
  ['perf record -N --buildid-mmap, as collect', ['-N', '--buildid-mmap'], false],
  ['perf record -N --buildid-mmap, with the vdso collect keeps', ['-N', '--buildid-mmap'], true],
] as const) {
  test(`a program calling clock_gettime in a loop (${how}): the same vDSO frames from both engines`, async (t) => {
    if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf') || !needCommand(t, 'gcc', 'gcc')) return;
    const dir = await mkdtemp(join(tmpdir(), 'profcpu-engines-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const program = join(dir, 'clockloop');
    // -fno-plt: calls through the GOT, so no sample lands in a PLT entry (a gap of its own, see gapFrame).
    await execa('gcc', ['-O1', '-fno-omit-frame-pointer', '-fno-plt', '-o', program, clockLoop]);
    await execa(
      'perf',
      ['record', ...flags, '-F', '499', '-g', '-e', 'cpu-clock', '-o', join(dir, 'perf.data')].concat([
        '--',
        program,
        '1',
      ]),
    );
    if (keepVdso) {
      await mkdir(join(dir, 'target'));
      await vdsoStep().afterRecording!({ dir, procRoot: '/proc', signal: new AbortController().signal } as StepContext);
      await stat(join(dir, layout.vdso));
    }
    const native = await assertSameFold(t, dir);
    const vdso = [...native].filter(([stack]) => stack.endsWith(';__vdso_clock_gettime'));
    const samples = [...native.values()].reduce((sum, n) => sum + n, 0);
    assert.ok(vdso.length > 0, [...native.keys()].join('\n'));
    t.diagnostic(`${vdso.reduce((sum, [, n]) => sum + n, 0)} of ${samples} samples end in __vdso_clock_gettime`);
  });
}

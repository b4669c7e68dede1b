// `profcpu fold` end to end: the built CLI on the golden fixtures, from a file and from stdin, and its errors.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { foldOptionsFromArgs } from '../../src/cli/fold.js';
import { execa } from 'execa';
import { demoWorkload, workloadFunction } from '../fixtures/node-burn/node-burn.js';
import { runCli } from '../support/cli.js';
import { canRecord } from '../support/requirements.js';

/** The CLI's output as strings. */
async function fold(args: string[], options: Parameters<typeof runCli>[1] = {}) {
  const r = await runCli(['fold', ...args], options);
  return { exitCode: r.exitCode, stdout: String(r.stdout), stderr: String(r.stderr), all: String(r.all) };
}

const fixtures = 'test/fixtures/perf-script/';
const read = (path: string) => readFileSync(new URL(`../fixtures/perf-script/${path}`, import.meta.url), 'utf8');
const base = {
  compat: false,
  pid: false,
  tid: false,
  addrs: false,
  keepArgs: false,
  keepModule: false,
  keepTier: false,
};

test('--compat with stackcollapse-perf.pl flags prints what the script prints', async () => {
  const file = await fold(['--compat', '--all', '--addrs', '--tid', `${fixtures}dotnet-names.txt`]);
  assert.equal(file.exitCode, 0, file.all);
  assert.equal(file.stdout + '\n', read('results/dotnet-names-collapsed-all-addrs-tid.txt'));
  const stdin = await fold(['--compat', '--event-filter', 'task-clock', '-q', '-'], {
    inputFile: `${fixtures}two-events.txt`,
  });
  assert.equal(stdin.exitCode, 0, stdin.all);
  assert.equal(stdin.stdout + '\n', read('results/two-events-collapsed-event-filter-task-clock.txt'));
  assert.equal(stdin.stderr, '');
});

test('the default mode is readable and reports what it folded on stderr', async () => {
  const result = await fold([], { inputFile: `${fixtures}dotnet-names.txt` });
  assert.equal(result.exitCode, 0, result.all);
  assert.equal(result.stdout + '\n', read('results/dotnet-names-folded.txt'));
  assert.match(result.stderr, /folded 5 of 5 samples into 5 stacks/);
});

test('warnings name what was skipped, once per kind', async () => {
  const result = await fold([`${fixtures}garbage.txt`]);
  assert.equal(result.exitCode, 0, result.all);
  assert.equal(result.stdout + '\n', read('results/garbage-folded.txt'));
  const warnings = result.stderr.split('\n').filter((line) => line.startsWith('profcpu: warning:'));
  assert.equal(new Set(warnings).size, warnings.length);
  assert.ok(warnings.some((w) => /neither sample headers nor frames/.test(w)));
});

test('no samples, everything filtered and unreadable input are told apart', async () => {
  const empty = await fold(['-'], { input: 'not perf script output\n' });
  assert.equal(empty.exitCode, 1);
  assert.match(empty.stderr, /no perf script samples in standard input/);
  const filtered = await fold(['--event-filter', 'cycles', `${fixtures}two-events.txt`]);
  assert.equal(filtered.exitCode, 1);
  assert.match(filtered.stderr, /all 497 samples .* were filtered out \(events seen: cpu-clock, task-clock\)/);
  const missing = await fold([`${fixtures}does-not-exist.txt`]);
  assert.equal(missing.exitCode, 1);
  assert.match(missing.stderr, /cannot read .*does-not-exist\.txt[\s\S]*fix:/);
  const badWeight = await fold(['--weight', 'bytes', `${fixtures}two-events.txt`]);
  assert.equal(badWeight.exitCode, 2);
});

test('--threads folds a file in parallel with the same output', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-fold-'));
  try {
    const big = join(dir, 'big.txt');
    const parts = ['two-events.txt', 'native-threads.txt', 'kernel-header.txt'].map((name) => read(name));
    writeFileSync(big, parts.join('').repeat(4));
    for (const flags of [[], ['--compat', '--all']]) {
      const one = await fold([...flags, '--threads', '1', big]);
      const three = await fold([...flags, '--threads', '3', big]);
      assert.equal(one.exitCode, 0, one.all);
      assert.equal(three.exitCode, 0, three.all);
      assert.equal(three.stdout, one.stdout);
      assert.equal(three.stderr, one.stderr);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a live perf recording of a Node process folds with its JIT frames named and annotated', async (t) => {
  if (!canRecord(t)) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-fold-live-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const data = join(dir, 'perf.data');
  const record = ['record', '-F', '99', '-g', '-e', 'cpu-clock', '-o', data, '--'];
  await execa('perf', [...record, process.execPath, '--perf-basic-prof', demoWorkload, '2'], { stdio: 'ignore' });
  const script = await execa('perf', ['script', '-i', data, '--no-inline'], { stderr: 'ignore', encoding: 'buffer' });
  const folded = await fold(['-'], { input: script.stdout });
  assert.equal(folded.exitCode, 0, folded.all);
  const lines = folded.stdout.split('\n');
  assert.ok(
    lines.every((line) => /^\S.* \d+$/.test(line)),
    'every line is `stack count`',
  );
  assert.ok(
    lines.some((line) => new RegExp(`;JS:[^;]*${workloadFunction}[^;]*_\\[j\\]`).test(line)),
    `a JIT frame of ${workloadFunction}, annotated _[j]`,
  );
  assert.match(folded.stderr, /folded \d+ of \d+ samples/);
});

test('flags map onto fold options; unset annotation flags keep the mode default', () => {
  assert.deepEqual(foldOptionsFromArgs({ ...base, compat: true, all: true }), {
    ...base0(),
    compat: true,
    annotateKernel: true,
    annotateJit: true,
  });
  assert.deepEqual(foldOptionsFromArgs({ ...base, kernel: false, weight: 'period', eventFilter: 'cpu-clock' }), {
    ...base0(),
    annotateKernel: false,
    weight: 'period',
    eventFilter: 'cpu-clock',
  });
  assert.throws(() => foldOptionsFromArgs({ ...base, eventFilter: ' ' }), /--event-filter needs an event name/);
});

function base0() {
  return {
    compat: false,
    includePid: false,
    includeTid: false,
    addrs: false,
    keepArguments: false,
    keepModule: false,
    keepTier: false,
  };
}

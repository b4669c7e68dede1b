// `profcpu fold` end to end: the built CLI on the golden fixtures, from a file and from stdin, and its errors.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { foldOptionsFromArgs } from '../../src/cli/fold.js';
import { runCli } from '../support/cli.js';

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
  const file = await runCli(['fold', '--compat', '--all', '--addrs', '--tid', `${fixtures}dotnet-names.txt`]);
  assert.equal(file.exitCode, 0, file.all);
  assert.equal(file.stdout + '\n', read('results/dotnet-names-collapsed-all-addrs-tid.txt'));
  const stdin = await runCli(['fold', '--compat', '--event-filter', 'task-clock', '-q', '-'], {
    inputFile: `${fixtures}two-events.txt`,
  });
  assert.equal(stdin.exitCode, 0, stdin.all);
  assert.equal(stdin.stdout + '\n', read('results/two-events-collapsed-event-filter-task-clock.txt'));
  assert.equal(stdin.stderr, '');
});

test('the default mode is readable and reports what it folded on stderr', async () => {
  const result = await runCli(['fold'], { inputFile: `${fixtures}dotnet-names.txt` });
  assert.equal(result.exitCode, 0, result.all);
  assert.equal(result.stdout + '\n', read('results/dotnet-names-folded.txt'));
  assert.match(result.stderr, /folded 5 of 5 samples into 5 stacks/);
});

test('warnings name what was skipped, once per kind', async () => {
  const result = await runCli(['fold', `${fixtures}garbage.txt`]);
  assert.equal(result.exitCode, 0, result.all);
  assert.equal(result.stdout + '\n', read('results/garbage-folded.txt'));
  const warnings = result.stderr.split('\n').filter((line) => line.startsWith('profcpu: warning:'));
  assert.equal(new Set(warnings).size, warnings.length);
  assert.ok(warnings.some((w) => /neither sample headers nor frames/.test(w)));
});

test('no samples, everything filtered and unreadable input are told apart', async () => {
  const empty = await runCli(['fold', '-'], { input: 'not perf script output\n' });
  assert.equal(empty.exitCode, 1);
  assert.match(empty.stderr, /no perf script samples in standard input/);
  const filtered = await runCli(['fold', '--event-filter', 'cycles', `${fixtures}two-events.txt`]);
  assert.equal(filtered.exitCode, 1);
  assert.match(filtered.stderr, /all 497 samples .* were filtered out \(events seen: cpu-clock, task-clock\)/);
  const missing = await runCli(['fold', `${fixtures}does-not-exist.txt`]);
  assert.equal(missing.exitCode, 1);
  assert.match(missing.stderr, /cannot read .*does-not-exist\.txt[\s\S]*fix:/);
  const badWeight = await runCli(['fold', '--weight', 'bytes', `${fixtures}two-events.txt`]);
  assert.equal(badWeight.exitCode, 2);
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

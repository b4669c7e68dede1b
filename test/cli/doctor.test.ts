import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runCli } from '../support/cli.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { ownCgroup } from '../support/cgroup.js';
import { canRecord } from '../support/requirements.js';
import { nonexistentPid } from '../support/processes.js';
import { startHostileProcess } from './hostile-process.js';
import { assertNoTerminalControl } from './terminal-control.js';

test('doctor passes for a Node process with its perf map (exit 0)', async (t) => {
  if (!canRecord(t)) return;
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  // In a cgroup of its own, as a service would be: then a perf that spins on exited threads is no warning either
  // (collect records the cgroup).
  const cgroup = await ownCgroup(t, node.pid);
  const run = await runCli(['doctor', '-pid', String(node.pid), '--output', '/var/tmp']);
  if (!cgroup && /^warn perf-spin: /m.test(String(run.stdout))) {
    // No cgroup v2 here: that warning is the only one.
    assert.equal(run.exitCode, 3, String(run.all));
    assert.deepEqual(String(run.stdout).match(/^warn \S+/gm), ['warn perf-spin:'], String(run.all));
    return;
  }
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stdout), new RegExp(`^ok   target: process ${node.pid} `, 'm'));
  assert.match(String(run.stdout), /^ok {3}perf_map: \/tmp\/perf-\d+\.map/m);
  assert.match(String(run.stdout), /^ok {3}perf_event_open: /m);
});

test('doctor warns (exit 3) when a Node process has no perf map, saying how to enable it', async (t) => {
  if (!canRecord(t)) return;
  const node = await startNodeBurn(30, { perfMap: false });
  t.after(() => node.kill());
  const run = await runCli(['doctor', '--pid', String(node.pid), '--output', '/var/tmp', '--quiet']);
  assert.equal(run.exitCode, 3, String(run.all));
  assert.match(String(run.stdout), /^warn perf_map: no perf map at \/tmp\/perf-\d+\.map/m);
  assert.match(String(run.stdout), /fix: Start node with --perf-basic-prof\./);
  assert.doesNotMatch(String(run.stdout), /^ok /m, '--quiet prints only what is not ok');
});

test('doctor fails (exit 1) for a PID that does not exist', async () => {
  const gone = nonexistentPid();
  const run = await runCli(['doctor', '--pid', String(gone)]);
  assert.equal(run.exitCode, 1, String(run.all));
  assert.match(String(run.stdout), new RegExp(`^FAIL target: no process ${gone} is visible here`, 'm'));
  assert.match(String(run.stdout), /fix: Check the PID with `profcpu ps`/);
});

test('doctor shows a hostile comm escaped, on its line', { timeout: 60_000 }, async (t) => {
  const hostile = await startHostileProcess();
  t.after(() => hostile.kill());
  const run = await runCli(['doctor', '--pid', String(hostile.pid), '--output', '/var/tmp'], { timeout: 50_000 });
  assertNoTerminalControl(String(run.stdout), 'stdout');
  assertNoTerminalControl(String(run.stderr), 'stderr');
  assert.match(
    String(run.stdout),
    new RegExp(
      `^ok {3}target: process ${hostile.pid} \\(ns pid \\d+, \\\\x1b\\[2J\\\\x07evil, other\\) is visible$`,
      'm',
    ),
  );
});

test('doctor lists ambiguous hostile command lines escaped, on the one FAIL line', { timeout: 60_000 }, async (t) => {
  const first = await startHostileProcess();
  t.after(() => first.kill());
  const second = await startHostileProcess(first.marker);
  t.after(() => second.kill());
  const name = first.cmdline[0]!;
  const run = await runCli(['doctor', '--name', name, '--output', '/var/tmp'], { timeout: 50_000 });
  assert.equal(run.exitCode, 1, String(run.all));
  const stdout = String(run.stdout);
  assertNoTerminalControl(stdout, 'stdout');
  assertNoTerminalControl(String(run.stderr), 'stderr');
  const lines = stdout.split('\n').filter((line) => line.includes(first.marker));
  assert.equal(lines.length, 1, stdout);
  assert.match(lines[0]!, /^FAIL target-choice: 2 processes are named "hostile\\x1b\]8;;x:evil\\x07link/);
  for (const pid of [first.pid, second.pid]) assert.ok(lines[0]!.includes(`${pid} (hostile\\x1b]8;;`), lines[0]);
});

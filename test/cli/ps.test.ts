import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTable } from '../../src/cli/ps.js';
import { runCli } from '../support/cli.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { needRoot } from '../support/requirements.js';
import { startHostileProcess } from './hostile-process.js';
import { assertNoTerminalControl } from './terminal-control.js';

test('formatTable pads every column but the last', () => {
  assert.deepEqual(
    formatTable([
      ['PID', 'COMMAND'],
      ['12345', 'dotnet Shop.dll'],
    ]),
    ['PID    COMMAND', '12345  dotnet Shop.dll'],
  );
});

test('formatTable escapes cells and pads by the escaped width', () => {
  assert.deepEqual(
    formatTable([
      ['RUNTIME', 'COMMAND'],
      ['a\x1b[2J', 'dotnet\n666  forged'],
      ['node', 'x'],
    ]),
    ['RUNTIME   COMMAND', 'a\\x1b[2J  dotnet\\n666  forged', 'node      x'],
  );
});

test('ps lists a Node process with a perf map, and --all lists one without', async (t) => {
  if (!needRoot(t)) return;
  const withMap = await startNodeBurn(30);
  t.after(() => withMap.kill());
  const without = await startNodeBurn(30, { perfMap: false });
  t.after(() => without.kill());
  const run = await runCli(['ps']);
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stdout), /^PID +NSPID +RUNTIME +PERFMAP +COMMAND$/m);
  assert.match(
    String(run.stdout),
    new RegExp(`^${withMap.pid} +${withMap.pid} +node +yes \\d+K +\\S*node --perf-basic-prof`, 'm'),
  );
  assert.doesNotMatch(String(run.stdout), new RegExp(`^${without.pid} `, 'm'));
  const all = await runCli(['ps', '--all', '--json']);
  const listed = JSON.parse(String(all.stdout)) as { pid: number; runtime: string; perfMap: { present: boolean } }[];
  const entry = listed.find((p) => p.pid === without.pid);
  assert.deepEqual([entry?.runtime, entry?.perfMap.present], ['node', false]);
});

test(
  'ps shows a hostile command line on one row, escaped; --json keeps the original strings',
  { timeout: 30_000 },
  async (t) => {
    const hostile = await startHostileProcess();
    t.after(() => hostile.kill());
    const run = await runCli(['ps', '--all'], { timeout: 20_000 });
    assert.equal(run.exitCode, 0, String(run.all));
    const stdout = String(run.stdout);
    assertNoTerminalControl(stdout, 'stdout');
    assertNoTerminalControl(String(run.stderr), 'stderr');
    const rows = stdout.split('\n').filter((line) => line.startsWith(`${hostile.pid} `));
    assert.equal(rows.length, 1, stdout);
    assert.equal(
      stdout.split('\n').filter((line) => line.includes(hostile.marker)).length,
      1,
      'the forged rows stay in their row',
    );
    assert.ok(
      rows[0]!.includes(`\\x1b]8;;x:evil\\x07link\\x1b]8;;\\x07\\x1b[2J\\x07\\u202e\\n${hostile.marker} 1 1`),
      rows[0],
    );
    assert.ok(rows[0]!.includes(`\\x1b[31m\\x9b2J\\t\\n${hostile.marker} 2 2`), rows[0]);

    const json = await runCli(['ps', '--all', '--json'], { timeout: 20_000 });
    assert.equal(json.exitCode, 0, String(json.all));
    const listed = JSON.parse(String(json.stdout)) as { pid: number; comm: string; cmdline: string[] }[];
    const entry = listed.find((p) => p.pid === hostile.pid);
    assert.deepEqual(entry?.cmdline, hostile.cmdline);
    assert.equal(entry?.comm, hostile.comm);
  },
);

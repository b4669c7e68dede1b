import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatTable } from '../../src/cli/ps.js';
import { runCli } from '../support/cli.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { needRoot } from '../support/requirements.js';

test('formatTable pads every column but the last', () => {
  assert.deepEqual(
    formatTable([
      ['PID', 'COMMAND'],
      ['12345', 'dotnet Shop.dll'],
    ]),
    ['PID    COMMAND', '12345  dotnet Shop.dll'],
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

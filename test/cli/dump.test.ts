// `profcpu dump` as a user runs it: --help names every type, a bad type or a --timeout too long for a timer is a
// usage error (exit 2), and a process without a diagnostic socket (not .NET) gets an error about dumps, not perf maps,
// and no output folder.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../support/cli.js';
import { tempDir } from '../support/temp.js';

test('dump --help lists the types and options', async () => {
  const run = await runCli(['dump', '--help']);
  assert.equal(run.exitCode, 0, String(run.all));
  for (const word of ['--pid', '--name', '--type', '"mini"', '"heap"', '"triage"', '"full"', '--output', '--max-size'])
    assert.ok(String(run.stdout).includes(word), `${word} in --help`);
});

test('an unknown type is a usage error', async () => {
  const run = await runCli(['dump', '-pid', '1', '-type', 'huge']);
  assert.equal(run.exitCode, 2, String(run.all));
  assert.match(String(run.stderr), /Choices: "mini", "heap", "triage", "full"/);
});

test('a --timeout beyond what a timer can hold (24.8 days) is a usage error, not an instant timeout', async () => {
  const run = await runCli(['dump', '--pid', '1', '--timeout', '2200000']);
  assert.equal(run.exitCode, 2, String(run.all));
  assert.match(String(run.stderr), /--timeout must be at most 2147483 seconds/);
});

test('a process that is not .NET: a dump-specific error, and no output folder', async (t) => {
  const work = await tempDir(t, 'cli-dump');
  const sleeper = spawn('sleep', ['60'], { stdio: 'ignore' });
  t.after(() => sleeper.kill());
  const run = await runCli(['dump', '--pid', String(sleeper.pid), '--output', join(work, 'out')], { timeout: 30_000 });
  assert.equal(run.exitCode, 1, String(run.all));
  assert.match(String(run.stderr), /has no diagnostic socket/);
  assert.match(String(run.stderr), /A dump is asked for over the \.NET diagnostic socket/);
  assert.deepEqual(await readdir(work), []);
});

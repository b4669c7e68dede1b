// `profcpu demo` end to end: the .NET workload built on first use (and not on the second), its perf map switched on
// by profcpu and its ProfcpuDemo methods named in the flame graph; the Node.js workload with --workload node; and
// `auto` choosing Node.js when there is no `dotnet`, or (with one warning) a runtime without an SDK.
import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { delimiter, join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { runtimeOnlyDotnet } from '../support/fake-dotnet.js';
import { pathWithout } from '../support/path-without.js';
import { namesWorkload } from '../fixtures/node-burn/node-burn.js';
import { canRecord, needDotnet } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

/** The demo's C# methods (src/collect/dotnet-demo/Program.cs) that a few seconds' profile always shows: the widest three. */
const dotnetMethods = [
  'ProfcpuDemo.Workload::Round',
  'ProfcpuDemo.PrimeSieve::CountPrimes',
  'ProfcpuDemo.OrderBook::SortOrders',
] as const;

/** Runs the demo into `<work>/out-<n>` and gives the run, its folder and its manifest's collect steps. */
async function demo(work: string, args: readonly string[], env: Record<string, string | undefined> = {}) {
  const dir = join(work, `out-${args.join('_').replace(/\W+/g, '')}-${Date.now()}`);
  const run = await runCli(['demo', '--output', dir, ...args], { cwd: work, env, timeout: 300_000 });
  assert.equal(run.exitCode, 0, String(run.all));
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    collect: { steps: Record<string, Record<string, unknown>> };
  };
  const pid = /started the (?:\.NET|Node\.js) demo workload \(PID (\d+);/.exec(String(run.stderr))?.[1];
  assert.ok(pid, String(run.stderr));
  await assert.rejects(access(`/proc/${pid}`), 'the workload is stopped');
  return { run, dir, steps: manifest.collect.steps };
}

test('demo --workload node names the Node.js workload’s JavaScript functions', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'demo', '/var/tmp');
  const { run, dir, steps } = await demo(work, ['--workload', 'node', '--duration', '2']);
  assert.match(String(run.stderr), /started the Node\.js demo workload \(PID \d+; --workload node\)/);
  assert.ok(namesWorkload(await readFile(join(dir, layout.flamegraphSvg), 'utf8')), 'the SVG names the workload');
  for (const file of [layout.tarball, layout.flamegraphHtml, layout.speedscope, layout.perfScript])
    await access(join(dir, file));
  assert.equal(steps['demoWorkload']?.['workload'], 'node');
  assert.equal(steps['perfMap']?.['state'], 'not-dotnet');
});

test('demo on .NET: built once, perf map switched on by profcpu, ProfcpuDemo methods named', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'demo', '/var/tmp');
  // A cache of the test's own, so the first run builds.
  const env = { XDG_CACHE_HOME: join(work, 'cache') };
  const first = await demo(work, ['--workload', 'auto', '--duration', '3'], env);
  const stderr = String(first.run.stderr);
  assert.match(stderr, /building the \.NET demo workload \(first run only\)…/);
  assert.match(stderr, /started the \.NET demo workload \(PID \d+; net\d+\.0, SDK \d+\.\d+\.\d+/);
  assert.doesNotMatch(stderr, /warning: .*Node\.js/);
  assert.equal(first.steps['perfMap']?.['state'], 'enabled-by-profcpu', JSON.stringify(first.steps['perfMap']));
  assert.equal(first.steps['perfMap']?.['restored'], true);
  assert.equal(first.steps['demoWorkload']?.['workload'], 'dotnet');
  assert.equal(first.steps['demoWorkload']?.['built'], true);
  const folded = await readFile(join(first.dir, layout.foldedStacks), 'utf8');
  const svg = await readFile(join(first.dir, layout.flamegraphSvg), 'utf8');
  for (const method of dotnetMethods) {
    assert.ok(folded.includes(method), `folded stacks name ${method}`);
    assert.ok(svg.includes(method), `the SVG names ${method}`);
  }
  assert.match(folded, /;System\.[^;]*::/, 'framework frames are named');

  const second = await demo(work, ['--workload', 'dotnet', '--duration', '1'], env);
  assert.doesNotMatch(String(second.run.stderr), /building the \.NET demo workload/);
  assert.equal(second.steps['demoWorkload']?.['built'], false);
  assert.equal(second.steps['demoWorkload']?.['executable'], first.steps['demoWorkload']?.['executable']);
});

test('demo (auto) with no dotnet on PATH profiles the Node.js workload and says why', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'demo', '/var/tmp');
  const env = { PATH: await pathWithout('dotnet', join(work, 'bin')), DOTNET_ROOT: undefined };
  const { run, steps } = await demo(work, ['--duration', '1'], env);
  const stderr = String(run.stderr);
  assert.match(stderr, /started the Node\.js demo workload \(PID \d+; no `dotnet` on PATH or in DOTNET_ROOT\)/);
  assert.doesNotMatch(stderr, /warning:.*dotnet/, 'no .NET is no reason for a warning');
  assert.equal(steps['demoWorkload']?.['workload'], 'node');
  assert.equal(steps['demoWorkload']?.['chosen'], 'auto');
});

test('demo (auto) with a .NET runtime but no SDK warns once and profiles the Node.js workload', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'demo', '/var/tmp');
  const fake = await runtimeOnlyDotnet(join(work, 'fake'));
  const env = { PATH: `${fake}${delimiter}${process.env['PATH']}`, DOTNET_ROOT: undefined };
  const { run } = await demo(work, ['--duration', '1'], env);
  const warnings = String(run.stderr).match(/^profcpu: warning: .*$/gm) ?? [];
  const fallback = warnings.filter((line) => line.includes('Node.js demo workload instead'));
  assert.equal(fallback.length, 1, String(run.stderr));
  assert.match(fallback[0]!, /has a \.NET runtime \(10\.0\.12\) but no SDK/);
  assert.match(String(run.stderr), /started the Node\.js demo workload/);
});

test('demo --workload dotnet with no dotnet fails, naming what is missing and the fix', async (t) => {
  const work = await tempDir(t, 'demo', '/var/tmp');
  const env = { PATH: await pathWithout('dotnet', join(work, 'bin')), DOTNET_ROOT: undefined };
  const run = await runCli(['demo', '--workload', 'dotnet', '--output', join(work, 'out')], { cwd: work, env });
  assert.equal(run.exitCode, 1, String(run.all));
  assert.match(String(run.stderr), /error: no `dotnet` on PATH or in DOTNET_ROOT/);
  assert.match(String(run.stderr), /fix: Install the \.NET SDK 8 or later .*--workload node/);
});

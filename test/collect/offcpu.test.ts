// `profcpu collect --off-cpu` on the .NET fixture's `waits` workload, on .NET 8, 9 and 10: each of its threads waits
// nearly all the time in a known way (a sleep, a lock held while sleeping and a thread waiting to enter it, a task's
// .Result, a socket read, a starved thread pool of Waits.PoolThreads workers), so each wait's time off the CPU is the
// recording's length times its threads, under the method that waits. Each must come out within 10 % of that, named
// through glibc's futex wait and the runtime (mixed unwinding of the switches' stack copies), with the outputs written.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { dotnetVersions, startDotnetApp } from '../support/dotnet-app.js';
import { canRecord, need, needDotnet } from '../support/requirements.js';
import { ownCgroup } from '../support/cgroup.js';
import { tempDir } from '../support/temp.js';

/** Each wait, the method it waits under, and how many threads wait there (test/fixtures/dotnet-app/Program.cs). */
const waits = [
  { frame: 'ProfcpuFixture.Waits::SleepPath_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::LockHolder_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::LockContender_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::SyncOverAsync_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::SocketRead_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::StarvedWorkItem_[j]', threads: 4 },
];

for (const version of dotnetVersions) {
  test(`collect --off-cpu, .NET ${version}: each known wait's time blocked within 10%, under the method that waits`, async (t) => {
    if (!canRecord(t) || !needDotnet(t)) return;
    const app = await startDotnetApp({ version, seconds: 120, workloads: ['waits'] });
    t.after(() => app.kill());
    const dir = join(await tempDir(t, 'offcpu'), 'out');
    const run = await runCli(
      ['collect', '--pid', String(app.pid), '--off-cpu', '--duration', '4', '--symbols', 'none', '--output', dir],
      { timeout: 120_000 },
    );
    assert.equal(run.exitCode, 0, run.all);

    const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
      collect: { record: { seconds: number; command: string[] }; options: { offCpu?: boolean; minBlockUs?: number } };
      offCpu: { blockedUs: number; intervals: { blocked: number }; unwound?: { samples: number } };
    };
    assert.deepEqual(manifest.collect.options.offCpu, true);
    assert.ok(manifest.collect.record.command.includes('--switch-events'), manifest.collect.record.command.join(' '));
    const seconds = manifest.collect.record.seconds;
    const folded = await readFile(join(dir, layout.offCpuFolded), 'utf8');
    const under = (frame: string) =>
      folded
        .split('\n')
        .filter((line) => line.split(';').includes(frame) || line.includes(`;${frame};`))
        .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
    const measured = waits.map(({ frame, threads }) => {
      const us = under(frame);
      return { frame, expectedMs: threads * seconds * 1000, ms: Math.round(us / 1000) };
    });
    t.diagnostic(`${seconds} s recorded: ${JSON.stringify(measured)}`);
    for (const { frame, expectedMs, ms } of measured)
      assert.ok(Math.abs(ms - expectedMs) <= 0.1 * expectedMs, `${frame}: ${ms} ms blocked, ${expectedMs} expected`);
    // Where they wait, below the app's frames: the runtime's wait for a task, a socket's receive.
    assert.match(folded, /Waits::SyncOverAsync_\[j\];.*System\.Threading\.ManualResetEventSlim::Wait_\[j\]/);
    assert.match(folded, /Waits::SocketRead_\[j\];.*System\.Net\.Sockets\.Socket::Receive_\[j\]/);
    assert.ok(manifest.offCpu.unwound && manifest.offCpu.unwound.samples > 0, 'the switches were unwound');

    // The CPU profile holds no switch, the off-CPU flame graphs count milliseconds blocked, speedscope microseconds.
    assert.doesNotMatch(await readFile(join(dir, layout.perfScript), 'utf8'), /sched:sched_switch: *\n/);
    assert.match(await readFile(join(dir, layout.offCpuSvg), 'utf8'), /ms blocked, /);
    const speedscope = JSON.parse(await readFile(join(dir, layout.offCpuSpeedscope), 'utf8')) as {
      profiles: { unit: string }[];
    };
    assert.equal(speedscope.profiles[0]!.unit, 'microseconds');
    assert.match(run.stdout, /off-CPU: [\d.]+ s blocked/);
    // All in the tarball, beside the raw recording.
    const { stdout: entries } = await execa('tar', ['tzf', join(dir, layout.tarball)]);
    for (const name of [layout.perfData, layout.offCpuSvg, layout.offCpuFolded, layout.wallClockSvg])
      assert.ok(
        entries.split('\n').some((entry) => entry.endsWith(`/${name}`) || entry === name),
        `${name} in:\n${entries}`,
      );
    assert.match(run.stdout, /: ProfcpuFixture\.Waits::StarvedWorkItem → System\.Threading\.Thread::Sleep → /);
  });
}

test('collect --off-cpu of a cgroup: the switch records are the cgroup’s, the waits the target’s, as with -p', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const app = await startDotnetApp({ version: 10, seconds: 120, workloads: ['waits'] });
  t.after(() => app.kill());
  if (!need(t, (await ownCgroup(t, app.pid)) !== undefined, 'cgroup v2 to put the target in')) return;
  const dir = join(await tempDir(t, 'offcpu-cgroup'), 'out');
  const run = await runCli(
    [
      'collect',
      '--pid',
      String(app.pid),
      '--off-cpu',
      '--scope',
      'cgroup',
      '--duration',
      '3',
      '--symbols',
      'none',
    ].concat(['--output', dir]),
    { timeout: 120_000 },
  );
  assert.equal(run.exitCode, 0, run.all);
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    collect: { record: { seconds: number; command: string[]; scope: { kind: string } } };
  };
  assert.equal(manifest.collect.record.scope.kind, 'cgroup');
  assert.match(manifest.collect.record.command.join(' '), / -e dummy -e .* --switch-events -a -G /);
  const folded = await readFile(join(dir, layout.offCpuFolded), 'utf8');
  const sleepUs = folded
    .split('\n')
    .filter((line) => line.includes(';ProfcpuFixture.Waits::SleepPath_[j];'))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  const expectedUs = manifest.collect.record.seconds * 1e6;
  assert.ok(Math.abs(sleepUs - expectedUs) <= 0.1 * expectedUs, `${sleepUs} µs asleep, ${expectedUs} expected`);
});

test('collect --off-cpu, the wall-clock view: each thread’s time running, blocked and runnable adds up to the recording', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const app = await startDotnetApp({ version: 10, seconds: 120, workloads: ['waits', 'generic'] });
  t.after(() => app.kill());
  const dir = join(await tempDir(t, 'offcpu-wall'), 'out');
  const run = await runCli(
    ['collect', '--pid', String(app.pid), '--off-cpu', '--duration', '4', '--symbols', 'none', '--output', dir],
    { timeout: 120_000 },
  );
  assert.equal(run.exitCode, 0, run.all);
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    collect: { record: { seconds: number } };
    offCpu: { threads: { kind: string; runningUs: number; blockedUs: number; runnableUs: number }[] };
  };
  const wallUs = manifest.collect.record.seconds * 1e6;
  const kind = (name: string) => {
    const found = manifest.offCpu.threads.find((k) => k.kind === name);
    assert.ok(found, `${name} among ${JSON.stringify(manifest.offCpu.threads)}`);
    return { ...found, totalUs: found.runningUs + found.blockedUs + found.runnableUs };
  };
  t.diagnostic(JSON.stringify(manifest.offCpu.threads.slice(0, 8)));
  // The thread that burns CPU runs most of the time (2 cores, other tests beside it); the sleeper blocks.
  const burner = kind('fixture-generic');
  assert.ok(Math.abs(burner.totalUs - wallUs) <= 0.1 * wallUs, `${JSON.stringify(burner)} against ${wallUs} µs`);
  assert.ok(burner.runningUs >= 0.5 * wallUs, JSON.stringify(burner));
  const sleeper = kind('wait-sleep');
  assert.ok(Math.abs(sleeper.totalUs - wallUs) <= 0.1 * wallUs, `${JSON.stringify(sleeper)} against ${wallUs} µs`);
  assert.ok(sleeper.blockedUs >= 0.9 * wallUs, JSON.stringify(sleeper));
  // The view itself: the burner's CPU stacks and the sleeper's wait, in milliseconds.
  const folded = await readFile(join(dir, layout.wallClockFolded), 'utf8');
  assert.match(folded, /^fixture-generic;.*Hot\+Outer`1\+Inner`1\[.*\]::Churn_\[j\]/m);
  assert.match(folded, /^wait-sleep;.*ProfcpuFixture\.Waits::SleepPath_\[j\];/m);
  assert.match(await readFile(join(dir, layout.wallClockSvg), 'utf8'), / ms, [\d.]+%\)<\/title>/);
  assert.match(run.stdout, /threads: running \/ blocked \/ waiting for a CPU/);
});

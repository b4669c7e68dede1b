// `profcpu collect --off-cpu` on the .NET fixture's `waits` workload, on .NET 8, 9 and 10: each of its threads waits
// nearly all the time in a known way (a sleep, a lock held while sleeping and a thread waiting to enter it, a task's
// .Result, a socket read, a starved thread pool of Waits.PoolThreads workers), so each wait's time off the CPU is the
// recording's length times its threads, under the method that waits. Each must come out within 10 % of that, named
// through glibc's futex wait and the runtime (mixed unwinding of the switches' stack copies), with the outputs written.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { execa } from 'execa';
import { loadFolderResolver } from '../../src/dotnet/naming/folder-resolver.js';
import { foldOffCpu } from '../../src/engine/offcpu/offcpu-fold.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { layout } from '../../src/output/layout.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { runCli } from '../support/cli.js';
import { decodePprof, pprofToFolded, stringAt } from '../support/pprof.js';
import { dotnetVersions, startDotnetApp, type DotnetAppWorkload, type DotnetVersion } from '../support/dotnet-app.js';
import { canRecord, need, needDotnet } from '../support/requirements.js';
import { ownCgroup } from '../support/cgroup.js';
import { tempDir } from '../support/temp.js';
import { randomWindows } from '../support/switch-windows.js';

/** Each wait, the method it waits under, and how many threads wait there (test/fixtures/dotnet-app/Program.cs). */
const waits = [
  { frame: 'ProfcpuFixture.Waits::SleepPath_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::LockHolder_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::LockContender_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::SyncOverAsync_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::SocketRead_[j]', threads: 1 },
  { frame: 'ProfcpuFixture.Waits::StarvedWorkItem_[j]', threads: 4 },
];

/**
 * Starts the fixture with `workloads` and runs `profcpu collect --off-cpu` on it (exit 0 asserted): its folder, what it
 * printed, its manifest and the off-CPU folded stacks; undefined when a cgroup was asked for and cannot be had.
 */
async function collectOffCpu<M extends { collect: { record: { seconds: number } } }>(
  t: TestContext,
  app: { version: DotnetVersion; workloads: DotnetAppWorkload[] },
  options: { seconds: number; cgroup?: boolean; flags?: string[] },
): Promise<{ dir: string; stdout: string; all: string; manifest: M; folded: string } | undefined> {
  const started = await startDotnetApp({ ...app, seconds: 120 });
  t.after(() => started.kill());
  if (options.cgroup && !need(t, (await ownCgroup(t, started.pid)) !== undefined, 'cgroup v2 to put the target in'))
    return undefined;
  const dir = join(await tempDir(t, 'offcpu'), 'out');
  const scope = options.cgroup ? ['--scope', 'cgroup'] : [];
  const run = await runCli(
    ['collect', '--pid', String(started.pid), '--off-cpu', ...scope, '--duration', String(options.seconds)].concat([
      '--symbols',
      'none',
      '--output',
      dir,
      ...(options.flags ?? []),
    ]),
    { timeout: 120_000 },
  );
  assert.equal(run.exitCode, 0, run.all);
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as M;
  const folded = await readFile(join(dir, layout.offCpuFolded), 'utf8');
  return { dir, stdout: run.stdout, all: String(run.all), manifest, folded };
}

/** Microseconds off the CPU of the folded stacks through `frame`. */
function blockedUnder(folded: string, frame: string): number {
  return folded
    .split('\n')
    .filter((line) => line.split(';').includes(frame) || line.includes(`;${frame};`))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}

for (const version of dotnetVersions) {
  test(`collect --off-cpu, .NET ${version}: each known wait's time blocked within 10%, under the method that waits`, async (t) => {
    if (!canRecord(t) || !needDotnet(t)) return;
    const collected = await collectOffCpu<{
      collect: { record: { seconds: number; command: string[] }; options: { offCpu?: boolean; minBlockUs?: number } };
      offCpu: { blockedUs: number; intervals: { blocked: number }; unwound?: { samples: number } };
    }>(t, { version, workloads: ['waits'] }, { seconds: 4 });
    const { dir, stdout, all, manifest, folded } = collected!;
    assert.deepEqual(manifest.collect.options.offCpu, true);
    // --switch-share auto: the fixture blocks a few hundred times a second, every switch's stack is taken.
    assert.match(all, /off-CPU: the stacks of its switches: every one \(\d+ blocking switches a second\)/);
    assert.ok(!manifest.collect.record.command.some((arg) => arg.startsWith('--control')));
    assert.ok(manifest.collect.record.command.includes('--switch-events'), manifest.collect.record.command.join(' '));
    const seconds = manifest.collect.record.seconds;
    const measured = waits.map(({ frame, threads }) => {
      const us = blockedUnder(folded, frame);
      return { frame, expectedMs: threads * seconds * 1000, ms: Math.round(us / 1000) };
    });
    t.diagnostic(`${seconds} s recorded: ${JSON.stringify(measured)}`);
    for (const { frame, expectedMs, ms } of measured)
      assert.ok(Math.abs(ms - expectedMs) <= 0.1 * expectedMs, `${frame}: ${ms} ms blocked, ${expectedMs} expected`);
    // Where they wait, below the app's frames: the runtime's wait for a task, a socket's receive.
    assert.match(folded, /Waits::SyncOverAsync_\[j\];.*System\.Threading\.ManualResetEventSlim::Wait_\[j\]/);
    // (Socket::Receive itself may be inlined into SocketRead once the JIT optimizes it: seen on .NET 10.)
    assert.match(
      folded,
      /Waits::SocketRead_\[j\];.*System\.Net\.Sockets\.(Socket::Receive|SocketAsyncContext::ReceiveFrom)_\[j\]/,
    );
    assert.ok(manifest.offCpu.unwound && manifest.offCpu.unwound.samples > 0, 'the switches were unwound');

    // The CPU profile holds no switch, the off-CPU flame graphs count milliseconds blocked, speedscope microseconds.
    assert.doesNotMatch(await readFile(join(dir, layout.perfScript), 'utf8'), /sched:sched_switch: *\n/);
    assert.match(await readFile(join(dir, layout.offCpuSvg), 'utf8'), /ms blocked, /);
    const speedscope = JSON.parse(await readFile(join(dir, layout.offCpuSpeedscope), 'utf8')) as {
      profiles: { unit: string }[];
    };
    assert.equal(speedscope.profiles[0]!.unit, 'microseconds');
    assert.match(stdout, /off-CPU: [\d.]+ s blocked/);
    // All in the tarball, beside the raw recording.
    const { stdout: entries } = await execa('tar', ['tzf', join(dir, layout.tarball)]);
    for (const name of [layout.perfData, layout.offCpuSvg, layout.offCpuFolded, layout.wallClockSvg])
      assert.ok(
        entries.split('\n').some((entry) => entry.endsWith(`/${name}`) || entry === name),
        `${name} in:\n${entries}`,
      );
    assert.match(stdout, /: ProfcpuFixture\.Waits::StarvedWorkItem → System\.Threading\.Thread::Sleep → /);

    // The same recording folded as if its stacks had been taken a quarter of the time, in random windows
    // (--switch-share 25): each wait's time still within 10%, though the waits are periodic.
    const folder = await OutputFolder.open(dir);
    t.after(() => folder.close());
    const windowed = await foldOffCpu(
      folder,
      { fold: {}, simulatedWindows: randomWindows(0.25) },
      { warn: () => {}, resolver: await loadFolderResolver(dir) },
    );
    const windowedText = [...windowed.fold.stacks].map(([stack, us]) => `${stack} ${us}\n`).join('');
    assert.ok(windowed.switchWindows && windowed.switchWindows.unsampledUs > windowed.switchWindows.sampledUs);
    for (const { frame, threads } of waits) {
      const ms = Math.round(blockedUnder(windowedText, frame) / 1000);
      const expectedMs = threads * seconds * 1000;
      assert.ok(Math.abs(ms - expectedMs) <= 0.1 * expectedMs, `windowed: ${frame}: ${ms} ms, ${expectedMs} expected`);
    }
  });
}

test('collect --off-cpu --switch-share 25: stacks in random windows, each known wait’s time still within 10%', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  // The waits are periodic (a lock passed back and forth every 51 ms, sleeps of 20 ms): a fixed sampling period would
  // alias with them; random windows do not, and each thread's stacks are weighed to its whole time blocked.
  const collected = await collectOffCpu<{
    collect: {
      record: {
        seconds: number;
        command: string[];
        switchWindows?: { share: number; measuredShare: number; windows: number };
      };
      options: { switchShare?: number };
    };
    offCpu: { switchWindows?: { sampledUs: number; unsampledUs: number } };
  }>(t, { version: 10, workloads: ['waits'] }, { seconds: 4, flags: ['--switch-share', '25'] });
  const { manifest, folded, all } = collected!;
  assert.equal(manifest.collect.options.switchShare, 0.25);
  assert.ok(manifest.collect.record.command.includes('--control=fd:3'), manifest.collect.record.command.join(' '));
  const windows = manifest.collect.record.switchWindows;
  assert.ok(
    windows && windows.windows >= 20 && windows.measuredShare > 0.1 && windows.measuredShare < 0.45,
    JSON.stringify(windows),
  );
  const taken = manifest.offCpu.switchWindows;
  assert.ok(taken && taken.sampledUs > 0 && taken.unsampledUs > taken.sampledUs, JSON.stringify(taken));
  assert.match(all, /their stacks in random windows, 25% of the time/);
  assert.match(all, /stacks taken in windows of time \(collect --switch-share\): [\d.]+% of the time blocked had one/);
  const seconds = manifest.collect.record.seconds;
  const measured = waits.map(({ frame, threads }) => {
    const us = blockedUnder(folded, frame);
    return { frame, expectedMs: threads * seconds * 1000, ms: Math.round(us / 1000) };
  });
  t.diagnostic(`${seconds} s recorded, ${JSON.stringify(windows)}: ${JSON.stringify(measured)}`);
  for (const { frame, expectedMs, ms } of measured)
    assert.ok(Math.abs(ms - expectedMs) <= 0.1 * expectedMs, `${frame}: ${ms} ms blocked, ${expectedMs} expected`);
});

test('collect --off-cpu of a cgroup: the switch records are the cgroup’s, the waits the target’s, as with -p', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const collected = await collectOffCpu<{
    collect: {
      record: { seconds: number; command: string[]; scope: { kind: string } };
      options: { switchStackBytes?: number };
    };
  }>(t, { version: 10, workloads: ['waits'] }, { seconds: 3, cgroup: true, flags: ['--switch-stack-size', '16000'] });
  if (!collected) return;
  const { manifest, folded, all } = collected;
  assert.equal(manifest.collect.record.scope.kind, 'cgroup');
  assert.match(manifest.collect.record.command.join(' '), / -e dummy -e .* --switch-events -a -G /);
  // --switch-stack-size (rounded up to 8 bytes) sizes the switches' copies, and says how far they took the stacks.
  assert.equal(manifest.collect.options.switchStackBytes, 16000);
  assert.match(manifest.collect.record.command.join(' '), /sched:sched_switch\/call-graph=dwarf,stack-size=16000\//);
  assert.match(all, /with a 16000-byte stack copy each/);
  assert.match(all, /off-CPU: unwound the stack copies of \d+ switches: \d+\.\d% to their thread's start/);
  const sleepUs = blockedUnder(folded, 'ProfcpuFixture.Waits::SleepPath_[j]');
  const expectedUs = manifest.collect.record.seconds * 1e6;
  assert.ok(Math.abs(sleepUs - expectedUs) <= 0.1 * expectedUs, `${sleepUs} µs asleep, ${expectedUs} expected`);
  // The built-in engine folded the switches in its one read of the recording; with perf script making the CPU
  // profile, the off-CPU fold reads it by itself: the same stacks, the same microseconds.
  const again = await runCli(['postprocess', '--dir', collected.dir, '--engine', 'perf', '--no-tarball']);
  assert.equal(again.exitCode, 0, again.all);
  assert.equal(await readFile(join(collected.dir, layout.offCpuFolded), 'utf8'), folded);
});

test('collect --off-cpu, the wall-clock view: each thread’s time running, blocked and runnable adds up to the recording', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const collected = await collectOffCpu<{
    collect: { record: { seconds: number } };
    offCpu: { threads: { kind: string; runningUs: number; blockedUs: number; runnableUs: number }[] };
  }>(t, { version: 10, workloads: ['waits', 'generic'] }, { seconds: 4 });
  const { dir, stdout, manifest } = collected!;
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
  const wall = await readFile(join(dir, layout.wallClockFolded), 'utf8');
  // (Churn, unless tier 1 inlined it into Workloads::Run by the time the recording began.)
  assert.match(wall, /^fixture-generic;.*(Hot\+Outer`1\+Inner`1\[.*\]::Churn|ProfcpuFixture\.Workloads::Run)_\[j\]/m);
  assert.match(wall, /^wait-sleep;.*ProfcpuFixture\.Waits::SleepPath_\[j\];/m);
  assert.match(await readFile(join(dir, layout.wallClockSvg), 'utf8'), / ms, [\d.]+%\)<\/title>/);
  assert.match(stdout, /threads: running \/ blocked \/ waiting for a CPU/);

  // The pprof profiles, read by a decoder we did not write: the same stacks as each folded file, time in nanoseconds,
  // the target's pid on every sample, libc's frames in a mapping with libc's build-id.
  const pid = JSON.parse(await readFile(join(dir, layout.targetInfo), 'utf8')).pid as number;
  const kept = JSON.parse(await readFile(join(dir, layout.binariesIndex), 'utf8')) as {
    binaries: { path: string; buildId: string }[];
  };
  for (const [pprof, folded, type, scale] of [
    [layout.pprof, layout.foldedStacks, 'samples/count', 1],
    [layout.offCpuPprof, layout.offCpuFolded, 'blocked/nanoseconds', 1000],
    [layout.wallClockPprof, layout.wallClockFolded, 'wall/nanoseconds', 1000],
  ] as const) {
    const profile = decodePprof(await readFile(join(dir, pprof)));
    const expected = parseFoldedText(await readFile(join(dir, folded), 'utf8')).stacks;
    assert.deepEqual(pprofToFolded(profile), new Map([...expected].map(([stack, n]) => [stack, n * scale])), pprof);
    const first = profile.sampleType[0]!;
    assert.equal(`${stringAt(profile, first.type)}/${stringAt(profile, first.unit)}`, type, pprof);
    const pidKey = profile.stringTable.strings.indexOf('pid');
    for (const sample of profile.sample)
      assert.equal(Number(sample.label.find((l) => Number(l.key) === pidKey)?.num), pid, pprof);
    const libc = kept.binaries.find((b) => /\/libc\.so\.6$/.test(b.path));
    const mapping = profile.mapping.find((m) => stringAt(profile, m.filename) === libc?.path);
    assert.ok(libc && mapping, `libc among ${JSON.stringify(kept.binaries.map((b) => b.path))}`);
    assert.equal(stringAt(profile, mapping.buildId), libc.buildId);
    const inLibc = profile.location.filter((l) => Number(l.mappingId) === Number(mapping.id));
    assert.ok(inLibc.length > 0, `${pprof}: no location in libc`);
  }
});

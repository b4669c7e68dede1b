import assert from 'node:assert/strict';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import {
  cyclesCounted,
  defaultEvent,
  gatherFacts,
  judgeFacts,
  worstStatus,
  type Check,
  type MachineFacts,
} from '../../src/perf/preflight.js';
import { capability } from '../../src/target/procfs.js';
import type { TargetInfo } from '../../src/target/inspect.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { needCommand } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

const now = 1_800_000_000_000;
const bit = (n: number) => 1n << BigInt(n);

const healthy: MachineFacts = {
  perfVersion: '6.1.187',
  kernelRelease: '6.1.0-18-amd64',
  paranoid: 2,
  kptrRestrict: 0,
  uid: 0,
  capEff: bit(capability.PERFMON) | bit(capability.SYS_ADMIN) | bit(capability.SYS_PTRACE),
  seccomp: 0,
  cyclesSupported: false,
  outputDir: '/out',
  freeBytes: 10 * 1024 ** 3,
};

function target(overrides: Partial<TargetInfo> = {}): TargetInfo {
  return {
    pid: 4242,
    nspid: 1,
    comm: 'dotnet',
    cmdline: ['dotnet', 'Shop.dll'],
    uid: 0,
    runtime: 'dotnet',
    dotnet: { coreclrPath: '/x/libcoreclr.so', version: '8.0.11', writeXorExecute: true },
    startTicks: 100,
    perfMap: {
      path: '/tmp/perf-1.map',
      hostPath: '/proc/4242/root/tmp/perf-1.map',
      present: true,
      size: 4096,
      mtimeMs: now - 2000,
      uid: 0,
    },
    jitDump: { path: '/tmp/jit-1.dump', hostPath: '/proc/4242/root/tmp/jit-1.dump', present: false },
    ...overrides,
  };
}

const byId = (checks: Check[], id: string) => checks.find((c) => c.id === id);

test('a healthy root sidecar passes every check', () => {
  const cgroup = { cgroup: 'docker/f00d', path: '/docker/f00d' };
  const facts = { ...healthy, pid: 4242, target: target(), targetStartMs: now - 60_000, targetCgroup: cgroup };
  const checks = judgeFacts(facts, now);
  assert.equal(worstStatus(checks), 'ok', JSON.stringify(checks, null, 1));
  assert.deepEqual(
    checks.map((c) => c.id),
    [
      'perf',
      'perf-spin',
      'perf_event_paranoid',
      'capabilities',
      'perf_event_open',
      'kptr_restrict',
      'target',
      'perf_map',
      'disk',
    ],
  );
  assert.match(byId(checks, 'perf-spin')!.message, /records the target's cgroup \/docker\/f00d instead/);
  assert.match(byId(checks, 'perf')!.message, /perf 6\.1\.187 on kernel 6\.1\.0-18-amd64$/);
  assert.match(byId(checks, 'perf_map')!.message, /updated 2 s ago/);
  assert.equal(defaultEvent(healthy), 'cpu-clock');
  assert.equal(defaultEvent({ ...healthy, cyclesSupported: true }), 'cycles');
});

test('a perf that spins on exited threads warns when the target has no cgroup of its own; a newer one is not checked', () => {
  const facts = { ...healthy, pid: 4242, target: target(), targetStartMs: now - 60_000 };
  const spin = byId(judgeFacts({ ...facts, targetCgroup: { why: 'it runs in the root cgroup' } }, now), 'perf-spin')!;
  assert.equal(spin.status, 'warn');
  assert.match(spin.message, /perf 6\.1\.187 spins .* the root cgroup/);
  assert.match(spin.remedy ?? '', /perf 7\.2 or later/);
  assert.equal(byId(judgeFacts({ ...facts, perfVersion: '7.3.4' }, now), 'perf-spin'), undefined);
});

test('kernel symbols that read as zeros warn, naming CAP_SYSLOG', () => {
  const check = byId(judgeFacts({ ...healthy, kallsymsHidden: true }, now), 'kptr_restrict')!;
  assert.equal(check.status, 'warn');
  assert.match(check.remedy ?? '', /CAP_SYSLOG/);
});

test('missing perf is fatal with the install command', () => {
  const { perfVersion: _, ...facts } = healthy;
  const check = byId(judgeFacts({ ...facts, perfError: 'perf was not found (perf)' }, now), 'perf')!;
  assert.equal(check.status, 'fatal');
  assert.match(check.remedy ?? '', /apt-get install linux-perf/);
});

test('an unprivileged user: paranoid 2 warns, 3 is fatal, and capabilities warn', () => {
  const user = { ...healthy, uid: 1000, capEff: 0n };
  assert.equal(byId(judgeFacts({ ...user, paranoid: 2 }, now), 'perf_event_paranoid')!.status, 'warn');
  const fatal = byId(judgeFacts({ ...user, paranoid: 3 }, now), 'perf_event_paranoid')!;
  assert.equal(fatal.status, 'fatal');
  assert.match(fatal.remedy ?? '', /sysctl kernel\.perf_event_paranoid=1/);
  assert.equal(byId(judgeFacts(user, now), 'capabilities')!.status, 'warn');
});

test('a failed perf_event_open behind a seccomp filter points at the container’s seccomp profile', () => {
  const check = byId(
    judgeFacts({ ...healthy, seccomp: 2, probeError: 'Operation not permitted' }, now),
    'perf_event_open',
  )!;
  assert.equal(check.status, 'fatal');
  assert.match(check.remedy ?? '', /seccomp/);
});

test('kptr_restrict=2 warns that kernel frames stay unnamed', () => {
  assert.equal(byId(judgeFacts({ ...healthy, kptrRestrict: 2 }, now), 'kptr_restrict')!.status, 'warn');
  assert.equal(byId(judgeFacts({ ...healthy, kptrRestrict: 1 }, now), 'kptr_restrict')!.status, 'ok');
});

test('target checks: invisible is fatal, another user without CAP_SYS_PTRACE is fatal', () => {
  const missing = byId(
    judgeFacts({ ...healthy, pid: 9, targetError: { message: 'no process 9 is visible here', remedy: 'r' } }, now),
    'target',
  )!;
  assert.deepEqual(missing, { id: 'target', status: 'fatal', message: 'no process 9 is visible here', remedy: 'r' });
  const other = judgeFacts(
    { ...healthy, uid: 1000, capEff: bit(capability.PERFMON), pid: 4242, target: target({ uid: 1001 }) },
    now,
  );
  assert.equal(byId(other, 'ptrace')!.status, 'fatal');
});

test('perf map checks: absent warns with how to enable it (before .NET 8), stale warns, foreign owner is fine', () => {
  const noMap = { path: '/tmp/perf-1.map', hostPath: '/x', present: false };
  const dotnet7 = { coreclrPath: '/x/libcoreclr.so', version: '7.0.5', writeXorExecute: true };
  const absent7 = byId(
    judgeFacts({ ...healthy, pid: 4242, target: target({ perfMap: noMap, dotnet: dotnet7 }) }, now),
    'perf_map',
  )!;
  assert.equal(absent7.status, 'warn');
  assert.match(absent7.remedy ?? '', /DOTNET_PerfMapEnabled=1/);
  const absent8 = byId(judgeFacts({ ...healthy, pid: 4242, target: target({ perfMap: noMap }) }, now), 'perf_map')!;
  assert.equal(absent8.status, 'ok', '.NET 8+: collect switches the map on over the diagnostic socket');
  assert.match(absent8.message, /diagnostic socket/);
  const stale = byId(judgeFacts({ ...healthy, pid: 4242, target: target(), targetStartMs: now }, now), 'perf_map')!;
  assert.equal(stale.status, 'warn');
  assert.match(stale.message, /older than the process/);
  const foreign = target();
  foreign.perfMap.uid = 1000;
  assert.match(
    byId(judgeFacts({ ...healthy, pid: 4242, target: foreign }, now), 'perf_map')!.message,
    /belongs to uid 1000/,
  );
});

test('disk checks: low space warns, almost none is fatal', () => {
  assert.equal(byId(judgeFacts({ ...healthy, freeBytes: 100 * 1024 ** 2 }, now), 'disk')!.status, 'warn');
  assert.equal(byId(judgeFacts({ ...healthy, freeBytes: 1024 ** 2 }, now), 'disk')!.status, 'fatal');
});

test('cyclesCounted reads perf stat’s CSV', () => {
  assert.equal(
    cyclesCounted('<not supported>,,cycles,0,100.00,,\n0.95,msec,cpu-clock,948874,100.00,0.206,CPUs utilized\n'),
    false,
  );
  assert.equal(cyclesCounted('1234567,,cycles,948874,100.00,,\n'), true);
  assert.equal(cyclesCounted(''), false);
});

async function fakeRoot(t: TestContext) {
  const dir = await tempDir(t, 'preflight');
  return dir;
}

test('gatherFacts reads sysctls from the given root and reports a perf that cannot run', async (t) => {
  const dir = await fakeRoot(t);
  await mkdir(join(dir, 'sys/kernel'), { recursive: true });
  await writeFile(join(dir, 'sys/kernel/perf_event_paranoid'), '3\n');
  await writeFile(join(dir, 'sys/kernel/kptr_restrict'), '2\n');
  // A fake perf that fails, as a broken install would.
  const perf = join(dir, 'perf');
  await writeFile(perf, '#!/bin/sh\necho "perf: broken install" >&2\nexit 1\n');
  await chmod(perf, 0o755);
  const facts = await gatherFacts({ perfPath: perf, sysctlRoot: join(dir, 'sys'), outputDir: join(dir, 'not/yet') });
  assert.equal(facts.paranoid, 3);
  assert.equal(facts.kptrRestrict, 2);
  assert.match(facts.perfError ?? '', /broken install/);
  assert.ok((facts.freeBytes ?? 0) > 0, 'free space of the nearest existing folder');
  assert.equal(worstStatus(judgeFacts(facts)), 'fatal');
});

test('gatherFacts on this machine probes perf_event_open and inspects a live target', async (t) => {
  if (!needCommand(t, 'perf', 'linux-perf')) return;
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const facts = await gatherFacts({ pid: node.pid });
  assert.match(facts.perfVersion ?? '', /^\d+\.\d+/);
  assert.equal(facts.target?.pid, node.pid);
  assert.ok(facts.targetStartMs! <= Date.now() && facts.targetStartMs! > Date.now() - 120_000, 'start time is recent');
  const mapCheck = byId(judgeFacts(facts), 'perf_map')!;
  assert.equal(mapCheck.status, 'ok', mapCheck.message);
});

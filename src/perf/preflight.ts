// Can perf record this target from here? Facts about the machine (perf's version, sysctls, our capabilities, the
// target, free disk) in, a list of checks out, each ok / warn / fatal with a one-line remedy. `profcpu doctor`
// prints them; `collect` runs the same and stops on a fatal one. Reading the facts (`gatherFacts`) is kept apart from
// judging them (`judgeFacts`, pure), so every verdict is tested without needing a broken machine.
import { readFile, statfs } from 'node:fs/promises';
import { release } from 'node:os';
import { dirname, resolve } from 'node:path';
import { isProfcpuError } from '../error.js';
import { inspectProcess, type TargetInfo } from '../target/inspect.js';
import { capability, hasCapability, processStartMs, readSelfStatus, type ProcfsOptions } from '../target/procfs.js';
import { runPerf } from './exec.js';
import { readPathCapped } from '../files/bounded-read.js';
import { findTargetCgroup, spinsWhenThreadsExit, type TargetCgroup } from './record-scope.js';
import { parsePerfVersion } from './version.js';

export type CheckStatus = 'ok' | 'warn' | 'fatal';

export interface Check {
  id: string;
  status: CheckStatus;
  message: string;
  /** What to do about a warn or fatal, one line. */
  remedy?: string;
}

export interface PreflightOptions extends ProcfsOptions {
  /** The perf executable. Default `perf` on PATH. */
  perfPath?: string;
  /** The target's PID, if one was chosen: its visibility and perf map are checked. */
  pid?: number;
  /** Where the recording will be written (it may not exist yet): its free space is checked. */
  outputDir?: string;
  /** Where the kernel's sysctls are. Default `/proc/sys`. */
  sysctlRoot?: string;
  signal?: AbortSignal;
}

export const preflightDefaults = Object.freeze({
  /** Below this much free space in the output folder, warn: a 30 s recording of a busy service takes tens of MB. */
  lowDiskBytes: 200 * 1024 * 1024,
  /** Below this, recording is pointless: fatal. */
  minDiskBytes: 20 * 1024 * 1024,
});

/** What the checks are judged from; a field is absent when it could not be read. */
export interface MachineFacts {
  perfVersion?: string;
  /** Whether the perf at hand writes zstd-compressed records (`-z`): its build options say `zstd: [ on ]`. */
  perfCompresses?: boolean;
  /** Why perf could not be run, when it could not. */
  perfError?: string;
  kernelRelease: string;
  paranoid?: number;
  kptrRestrict?: number;
  /** /proc/kallsyms shows every address as 0 to us (no CAP_SYSLOG, or kptr_restrict): kernel frames stay unnamed. */
  kallsymsHidden?: boolean;
  /** Our effective uid, capabilities and seccomp mode. */
  uid: number;
  capEff: bigint;
  seccomp: number;
  /** Why a real perf_event_open failed, when it did. */
  probeError?: string;
  /** Whether the hardware `cycles` event counts here. */
  cyclesSupported?: boolean;
  pid?: number;
  target?: TargetInfo;
  /** Why the target could not be inspected. */
  targetError?: { message: string; remedy?: string };
  /** The target's own cgroup as perf -G names it, or why it has none (read when perf spins on exited threads). */
  targetCgroup?: TargetCgroup;
  /** When the target started, ms since the epoch (a perf map older than that is stale). */
  targetStartMs?: number;
  outputDir?: string;
  /** Free bytes where the output goes. */
  freeBytes?: number;
}

/** Reads every fact the checks need. A fact that cannot be read is left out, never thrown. */
export async function gatherFacts(options: PreflightOptions = {}): Promise<MachineFacts> {
  const sys = options.sysctlRoot ?? '/proc/sys';
  const exec = { perfPath: options.perfPath, signal: options.signal };
  const self = await readSelfStatus(options);
  const facts: MachineFacts = {
    kernelRelease: release(),
    uid: self?.uid.effective ?? -1,
    capEff: self?.capEff ?? 0n,
    seccomp: self?.seccomp ?? 0,
  };
  const [paranoid, kptr] = await Promise.all([
    readNumber(`${sys}/kernel/perf_event_paranoid`),
    readNumber(`${sys}/kernel/kptr_restrict`),
  ]);
  if (paranoid !== undefined) facts.paranoid = paranoid;
  if (kptr !== undefined) facts.kptrRestrict = kptr;
  const hidden = await kallsymsHidden(options.procRoot ?? '/proc');
  if (hidden !== undefined) facts.kallsymsHidden = hidden;
  try {
    facts.perfVersion = parsePerfVersion((await runPerf(['version'], exec)).stdout);
    const options = await runPerf(['version', '--build-options'], exec).catch((error: unknown) => {
      if (isProfcpuError(error, 'ABORTED')) throw error;
      return undefined;
    });
    if (options) facts.perfCompresses = buildOptionOn(options.stdout, 'zstd');
    // A real perf_event_open: the only way to know that seccomp, capabilities and paranoia together allow it.
    const probe = await runPerf(['stat', '-x', ',', '-e', 'cycles,cpu-clock', '--', 'true'], exec).catch(
      (error: unknown) => (error instanceof Error ? error : new Error(String(error))),
    );
    if (probe instanceof Error) {
      if (isProfcpuError(probe, 'ABORTED')) throw probe;
      facts.probeError = probe.message;
    } else facts.cyclesSupported = cyclesCounted(probe.stderr);
  } catch (error) {
    if (isProfcpuError(error, 'ABORTED')) throw error;
    facts.perfError = error instanceof Error ? error.message : String(error);
  }
  if (options.pid !== undefined) {
    facts.pid = options.pid;
    try {
      facts.target = await inspectProcess(options.pid, options);
      if (facts.perfVersion !== undefined && spinsWhenThreadsExit(facts.perfVersion))
        facts.targetCgroup = await findTargetCgroup(options.pid, options);
      const started = await processStartMs(facts.target.startTicks, options);
      if (started !== undefined) facts.targetStartMs = started;
    } catch (error) {
      if (!isProfcpuError(error)) throw error;
      facts.targetError = { message: error.message, ...(error.remedy ? { remedy: error.remedy } : {}) };
    }
  }
  if (options.outputDir !== undefined) {
    facts.outputDir = options.outputDir;
    const fs = await statfs(await nearestExisting(options.outputDir)).catch(() => undefined);
    if (fs) facts.freeBytes = fs.bavail * fs.bsize;
  }
  return facts;
}

/** Whether `perf version --build-options` lists `feature: [ on  ]` (perf 5.x to 7.x spelling). */
export function buildOptionOn(text: string, feature: string): boolean {
  return text.split('\n').some((line) => {
    const match = /^\s*([\w-]+):\s*\[\s*(\w+)\s*\]/.exec(line);
    return match?.[1] === feature && match[2] === 'on';
  });
}

/** `perf stat -x,` prints `<not supported>,,cycles,...` when there is no hardware PMU. */
export function cyclesCounted(statOutput: string): boolean {
  const line = statOutput.split('\n').find((l) => /^[^,]*,[^,]*,cycles(?::\w+)?,/.test(l));
  return line !== undefined && !line.startsWith('<not');
}

/** The event to record when none was asked for: hardware cycles where they count, else the cpu-clock timer. */
export function defaultEvent(facts: MachineFacts): string {
  return facts.cyclesSupported ? 'cycles' : 'cpu-clock';
}

const installPerf =
  'install perf (`apt-get install linux-perf` on Debian, `linux-tools-$(uname -r)` on Ubuntu, `dnf install perf`)';

/** Judges the facts. Pure. */
export function judgeFacts(facts: MachineFacts, now = Date.now()): Check[] {
  const checks: Check[] = [];
  const add: AddCheck = (id, status, message, remedy) =>
    checks.push(remedy === undefined || status === 'ok' ? { id, status, message } : { id, status, message, remedy });
  const privileged =
    facts.uid === 0 ||
    hasCapability(facts.capEff, capability.PERFMON) ||
    hasCapability(facts.capEff, capability.SYS_ADMIN);
  judgePerf(facts, add);
  judgePerfSpin(facts, add);
  judgeParanoid(facts, add, privileged);
  judgeCapabilities(facts, add, privileged);
  judgePerfEventOpen(facts, add);
  judgeKernelSymbols(facts, add);
  if (facts.pid !== undefined) judgeTarget(facts, now, add);
  judgeDisk(facts, add);
  return checks;
}

type AddCheck = (id: string, status: CheckStatus, message: string, remedy?: string) => void;

/** perf runs, and how its version compares with the kernel's. */
function judgePerf(facts: MachineFacts, add: AddCheck): void {
  if (facts.perfVersion === undefined)
    add('perf', 'fatal', `perf cannot be run: ${facts.perfError ?? 'unknown'}`, installPerf);
  else {
    const skew = majorMinor(facts.perfVersion) !== majorMinor(facts.kernelRelease);
    add(
      'perf',
      'ok',
      `perf ${facts.perfVersion} on kernel ${facts.kernelRelease}${skew ? ' (versions differ: usually harmless)' : ''}`,
    );
  }
}

/** perf before 7.2 spins on exited threads: what collect does about it. */
function judgePerfSpin(facts: MachineFacts, add: AddCheck): void {
  if (facts.perfVersion !== undefined && spinsWhenThreadsExit(facts.perfVersion)) {
    const spin = `perf ${facts.perfVersion} spins once a thread it records with -p exits (a core or two while the target's threads come and go)`;
    const cgroup = facts.targetCgroup;
    if (cgroup && 'cgroup' in cgroup)
      add('perf-spin', 'ok', `${spin}: collect records the target's cgroup ${cgroup.path} instead, which does not`);
    else if (cgroup)
      add(
        'perf-spin',
        'warn',
        `${spin}, and its cgroup cannot be recorded instead: ${cgroup.why}`,
        'Use perf 7.2 or later (the sidecar image has it, so does Debian trixie-backports), or run the target in a cgroup of its own (a container, a systemd service).',
      );
    else
      add(
        'perf-spin',
        'warn',
        `${spin}; with --pid, doctor says whether collect can record its cgroup instead`,
        'Use perf 7.2 or later.',
      );
  }
}

/** kernel.perf_event_paranoid, which limits only an unprivileged perf. */
function judgeParanoid(facts: MachineFacts, add: AddCheck, privileged: boolean): void {
  if (facts.paranoid === undefined)
    add('perf_event_paranoid', 'warn', 'kernel.perf_event_paranoid cannot be read', 'Check that /proc/sys is mounted.');
  else if (privileged)
    add('perf_event_paranoid', 'ok', `kernel.perf_event_paranoid=${facts.paranoid} (privileged: not limiting)`);
  else if (facts.paranoid >= 2)
    add(
      'perf_event_paranoid',
      facts.paranoid >= 3 ? 'fatal' : 'warn',
      `kernel.perf_event_paranoid=${facts.paranoid} limits an unprivileged perf${facts.paranoid >= 3 ? ' to nothing' : ' to user space'}`,
      'Run as root or with CAP_PERFMON, or on the host: `sysctl kernel.perf_event_paranoid=1`.',
    );
  else add('perf_event_paranoid', 'ok', `kernel.perf_event_paranoid=${facts.paranoid}`);
}

/** Root, or the capabilities perf needs. */
function judgeCapabilities(facts: MachineFacts, add: AddCheck, privileged: boolean): void {
  const caps = (['PERFMON', 'SYS_ADMIN', 'SYS_PTRACE'] as const).filter((c) =>
    hasCapability(facts.capEff, capability[c]),
  );
  add(
    'capabilities',
    privileged ? 'ok' : 'warn',
    `uid ${facts.uid}, capabilities: ${caps.length ? caps.map((c) => `CAP_${c}`).join(', ') : 'none of CAP_PERFMON/SYS_ADMIN/SYS_PTRACE'}`,
    'Run as root, or give the container --cap-add PERFMON --cap-add SYS_PTRACE (or --privileged).',
  );
}

/** Whether perf could open an event here (a seccomp filter blocks it), and which. */
function judgePerfEventOpen(facts: MachineFacts, add: AddCheck): void {
  if (facts.probeError !== undefined)
    add(
      'perf_event_open',
      'fatal',
      `perf cannot open a perf event here: ${facts.probeError}`,
      facts.seccomp === 2
        ? 'A seccomp filter is active (Docker’s default blocks perf_event_open): run the container with --privileged or a seccomp profile that allows perf_event_open.'
        : 'Run as root or with CAP_PERFMON, or lower kernel.perf_event_paranoid on the host.',
    );
  else if (facts.perfVersion !== undefined)
    add(
      'perf_event_open',
      'ok',
      `perf events open here${facts.seccomp === 2 ? ' (despite a seccomp filter)' : ''}; hardware cycles ${facts.cyclesSupported ? 'available' : 'unavailable, so cpu-clock is used'}`,
    );
}

/** Whether kernel frames can be named: /proc/kallsyms readable, kptr_restrict. */
function judgeKernelSymbols(facts: MachineFacts, add: AddCheck): void {
  if (facts.kallsymsHidden)
    add(
      'kptr_restrict',
      'warn',
      `/proc/kallsyms shows every kernel address as 0 here (kernel.kptr_restrict=${facts.kptrRestrict ?? '?'}): kernel frames will be unnamed`,
      'Grant CAP_SYSLOG (docker run --cap-add SYSLOG; the launcher’s --least-privilege does), or run --privileged.',
    );
  else if (
    facts.kptrRestrict === undefined ||
    facts.kptrRestrict === 0 ||
    (facts.kptrRestrict === 1 && facts.uid === 0)
  )
    add('kptr_restrict', 'ok', `kernel.kptr_restrict=${facts.kptrRestrict ?? 'unreadable'}`);
  else
    add(
      'kptr_restrict',
      'warn',
      `kernel.kptr_restrict=${facts.kptrRestrict} hides kernel symbols: kernel frames will be unnamed`,
      'On the host: `sysctl kernel.kptr_restrict=0` (or run as root when it is 1).',
    );
}

/** Free space in the output folder. */
function judgeDisk(facts: MachineFacts, add: AddCheck): void {
  if (facts.outputDir === undefined) return;
  const free = facts.freeBytes;
  const mb = (n: number) => `${Math.round(n / 1024 / 1024)} MB`;
  if (free === undefined)
    add(
      'disk',
      'warn',
      `free space under ${facts.outputDir} cannot be read`,
      'Check that the output folder is writable.',
    );
  else if (free < preflightDefaults.minDiskBytes)
    add(
      'disk',
      'fatal',
      `only ${mb(free)} free under ${facts.outputDir}`,
      'Free some space or pass --output on another disk.',
    );
  else if (free < preflightDefaults.lowDiskBytes)
    add(
      'disk',
      'warn',
      `only ${mb(free)} free under ${facts.outputDir}`,
      'Keep recordings short or pass --output on another disk.',
    );
  else add('disk', 'ok', `${mb(free)} free under ${facts.outputDir}`);
}

function judgeTarget(facts: MachineFacts, now: number, add: AddCheck): void {
  const target = facts.target;
  if (!target) {
    add(
      'target',
      'fatal',
      facts.targetError?.message ?? `process ${facts.pid} cannot be inspected`,
      facts.targetError?.remedy,
    );
    return;
  }
  const runtime =
    target.runtime === 'dotnet' ? `.NET ${target.dotnet?.version ?? '(version unknown)'}` : target.runtime;
  add('target', 'ok', `process ${target.pid} (ns pid ${target.nspid}, ${target.comm}, ${runtime}) is visible`);
  if (target.uid !== facts.uid && facts.uid !== 0 && !hasCapability(facts.capEff, capability.SYS_PTRACE))
    add(
      'ptrace',
      'fatal',
      `process ${target.pid} belongs to uid ${target.uid}, not to us (uid ${facts.uid}), and CAP_SYS_PTRACE is missing`,
      'Run as root or as the target’s user, or add CAP_SYS_PTRACE.',
    );
  const map = target.perfMap;
  const howToEnable =
    target.runtime === 'dotnet'
      ? 'Start the app with DOTNET_PerfMapEnabled=1 (profcpu can also enable it over the diagnostic socket on .NET 8+).'
      : target.runtime === 'node'
        ? 'Start node with --perf-basic-prof.'
        : 'JIT runtimes need their perf-map option enabled; native code needs none.';
  // .NET 8 and later switch their perf map on when asked over the diagnostic socket, which collect does (--perfmap).
  const major = Number(/^(\d+)\./.exec(target.dotnet?.version ?? '')?.[1]);
  if (!map.present && target.runtime === 'dotnet' && major >= 8) {
    add(
      'perf_map',
      'ok',
      `no perf map at ${map.path} yet: collect switches it on over the diagnostic socket (--perfmap auto)`,
    );
    return;
  }
  if (!map.present) {
    add(
      'perf_map',
      target.runtime === 'other' ? 'ok' : 'warn',
      `no perf map at ${map.path} in the target: JIT-compiled frames will be unnamed`,
      howToEnable,
    );
    return;
  }
  const size = `${Math.round((map.size ?? 0) / 1024)} KB`;
  if (facts.targetStartMs !== undefined && map.mtimeMs !== undefined && map.mtimeMs + 1000 < facts.targetStartMs)
    add(
      'perf_map',
      'warn',
      `${map.path} (${size}) is older than the process: a leftover of an earlier process with the same PID`,
      'Delete the stale file and restart the target with its perf map enabled.',
    );
  else if (map.uid !== undefined && map.uid !== 0 && map.uid !== facts.uid)
    add(
      'perf_map',
      'ok',
      `${map.path} (${size}, updated ${Math.max(0, Math.round((now - (map.mtimeMs ?? now)) / 1000))} s ago) belongs to uid ${map.uid}; profcpu copies it, so perf's owner check does not matter`,
    );
  else
    add(
      'perf_map',
      'ok',
      `${map.path} (${size}, updated ${Math.max(0, Math.round((now - (map.mtimeMs ?? now)) / 1000))} s ago)`,
    );
}

/** The most serious status among the checks. */
export function worstStatus(checks: readonly Check[]): CheckStatus {
  if (checks.some((c) => c.status === 'fatal')) return 'fatal';
  return checks.some((c) => c.status === 'warn') ? 'warn' : 'ok';
}

function majorMinor(version: string): string {
  return /^(\d+\.\d+)/.exec(version)?.[1] ?? version;
}

/** Whether the first kernel symbols read show address 0 (what a reader without CAP_SYSLOG sees); undefined: unreadable. */
async function kallsymsHidden(procRoot: string): Promise<boolean | undefined> {
  const head = await readPathCapped(`${procRoot}/kallsyms`, { maxBytes: 4096, timeoutMs: 5000 }).catch(() => undefined);
  const addresses = (head?.bytes.toString('latin1') ?? '')
    .split('\n')
    .slice(0, -1)
    .map((line) => /^([0-9a-f]+) /i.exec(line)?.[1])
    .filter((a): a is string => a !== undefined);
  return addresses.length === 0 ? undefined : addresses.every((a) => /^0+$/.test(a));
}

async function readNumber(path: string): Promise<number | undefined> {
  const text = await readFile(path, 'utf8').catch(() => undefined);
  const n = Number(text?.trim());
  return text === undefined || text.trim() === '' || !Number.isFinite(n) ? undefined : n;
}

/** The closest existing ancestor of `path` (the output folder is usually created later). */
async function nearestExisting(path: string): Promise<string> {
  let dir = resolve(path);
  for (;;) {
    if (
      await statfs(dir).then(
        () => true,
        () => false,
      )
    )
      return dir;
    const parent = dirname(dir);
    if (parent === dir) return dir;
    dir = parent;
  }
}

// Which processes a watch rule applies to, found again on every scan so that a restarted app (a new PID, or the same
// PID with a new start time) is picked up. Takes /proc and a rule's filters; gives the matching processes. A process
// is inspected in full (maps, environment, to know its runtime) once, when first seen, and remembered by PID and start
// time, so an idle watch costs a listing of /proc per scan, the stat of each new process and of the processes that
// match, and the stat of every process once a minute (to tell a reused PID).
import { readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { readPathCapped } from '../files/bounded-read.js';
import { processNames } from '../target/discover.js';
import { inspectProcess, type TargetInfo } from '../target/inspect.js';
import {
  clockTicksPerSecond,
  listPids,
  ownPid,
  parseNulList,
  parseStat,
  procPath,
  procReadTimeoutMs,
  readProcText,
  readStatus,
  type ProcfsOptions,
} from '../target/procfs.js';
import type { Filters } from './rules.js';

/** A process as a scan saw it; `info` is undefined for processes that cannot be inspected (kernel threads...). */
export interface SeenProcess {
  pid: number;
  startTicks: number;
  info?: TargetInfo;
}

/** Bounds on what one scan looks at: a sidecar sees a handful of processes, a host a few thousand. */
export const scanLimits = Object.freeze({
  maxProcesses: 4096,
  maxInspectedPerScan: 64,
  /** A process younger than this (seconds) may not have mapped its runtime yet. */
  youngSeconds: 2,
  /** Every this many scans, every process's start time is read again (a minute with the default 5 s scans). */
  fullScanEvery: 12,
});

/**
 * Whether a process may match `filters`, from its comm and command line alone (no maps read): the filters on PID,
 * command line and name, whose dll form (`dotnet Shop.dll`) is taken from any argument here.
 */
export function mayMatch(filters: Filters, pid: number, comm: string, cmdline: readonly string[]): boolean {
  if (filters.pid !== undefined && pid !== filters.pid) return false;
  if (filters.commandLine !== undefined && !cmdline.join(' ').includes(filters.commandLine)) return false;
  if (filters.name !== undefined) {
    const names = [comm, basename(cmdline[0] ?? ''), ...cmdline.map((a) => /([^/]+)\.dll$/.exec(a)?.[1])];
    if (!names.includes(filters.name)) return false;
  }
  return true;
}

export function matchesFilters(filters: Filters, info: TargetInfo): boolean {
  if (filters.pid !== undefined && info.pid !== filters.pid) return false;
  if (filters.runtime !== undefined && info.runtime !== filters.runtime) return false;
  if (filters.name !== undefined && !processNames(info).includes(filters.name)) return false;
  if (filters.commandLine !== undefined && !info.cmdline.join(' ').includes(filters.commandLine)) return false;
  return true;
}

/** Seconds since boot (/proc/uptime), the clock of a process's start time. */
async function readUptime(options: ProcfsOptions): Promise<number | undefined> {
  const text = await readFile(join(options.procRoot ?? '/proc', 'uptime'), 'utf8').catch(() => undefined);
  const seconds = Number(text?.split(' ')[0]);
  return Number.isFinite(seconds) ? seconds : undefined;
}

/** The first 64 KiB of /proc/PID/cmdline (enough to match filters; inspection reads it whole); '' when gone. */
async function readCmdlineStart(pid: number, options: ProcfsOptions): Promise<string> {
  return readPathCapped(procPath(pid, 'cmdline', options), { maxBytes: 64 << 10, timeoutMs: procReadTimeoutMs }).then(
    (r) => r.bytes.toString('utf8'),
    () => '',
  );
}

/** Whether libcoreclr.so is mapped in the process, the sign of .NET inspectProcess goes by. */
async function mapsCoreclr(pid: number, options: ProcfsOptions): Promise<boolean> {
  const maps = await readProcText(pid, 'maps', options).catch(() => undefined);
  return maps !== undefined && /\/libcoreclr\.so$/m.test(maps);
}

export class ProcessScanner {
  /** What the last scan saw, by PID. */
  private known = new Map<number, SeenProcess>();
  private self: number | undefined;
  private scans = 0;

  constructor(private readonly procfs: ProcfsOptions) {}

  /**
   * Every visible user-space process but this one and its children (perf); those that may match one of `filters`
   * are inspected, once each, once at least youngSeconds old. New processes beyond maxInspectedPerScan wait for the
   * next scan. A PID seen before is
   * trusted to be the same process (its /proc/PID/stat not read again) unless it matches a filter, or until the
   * next full scan (every fullScanEvery scans), which finds a PID reused by another process.
   */
  async scan(filters: readonly Filters[]): Promise<SeenProcess[]> {
    this.self ??= await ownPid(this.procfs);
    const full = this.scans++ % scanLimits.fullScanEvery === 0;
    const pids = (await listPids(this.procfs)).slice(0, scanLimits.maxProcesses);
    const uptime = await readUptime(this.procfs);
    const next = new Map<number, SeenProcess>();
    let inspected = 0;
    for (const pid of pids) {
      if (pid === this.self) continue;
      const prior = this.known.get(pid);
      const matching = prior?.info && filters.some((f) => matchesFilters(f, prior.info!));
      if (prior && !matching && !full) {
        next.set(pid, prior);
        continue;
      }
      const statText = await readProcText(pid, 'stat', this.procfs).catch(() => undefined);
      const stat = statText === undefined ? undefined : parseStat(statText);
      if (!stat || statText === undefined) continue;
      if (prior?.startTicks === stat.startTicks) {
        next.set(pid, prior);
        continue;
      }
      // A .NET app maps libcoreclr.so some time after it starts: a young process is left for a later scan.
      const young = uptime !== undefined && uptime - stat.startTicks / clockTicksPerSecond < scanLimits.youngSeconds;
      if (inspected >= scanLimits.maxInspectedPerScan || young) continue;
      const comm = statText.slice(statText.indexOf('(') + 1, statText.lastIndexOf(')'));
      const cmdline = parseNulList(await readCmdlineStart(pid, this.procfs));
      // Kernel threads have no command line; a process no filter can match is never inspected, nor one that is not
      // .NET when every filter it may match wants .NET (its maps are a fraction of an inspection's reads).
      const candidates = cmdline.length === 0 ? [] : filters.filter((f) => mayMatch(f, pid, comm, cmdline));
      const onlyDotnet = candidates.every((f) => f.runtime === 'dotnet');
      if (candidates.length === 0 || (onlyDotnet && !(await mapsCoreclr(pid, this.procfs)))) {
        next.set(pid, { pid, startTicks: stat.startTicks });
        continue;
      }
      inspected++;
      next.set(pid, await this.inspect(pid, stat.startTicks));
    }
    this.known = next;
    return [...next.values()];
  }

  private async inspect(pid: number, startTicks: number): Promise<SeenProcess> {
    const status = await readStatus(pid, this.procfs).catch(() => undefined);
    // perf and whatever else this watch started are not targets.
    if (!status || status.ppid === this.self) return { pid, startTicks };
    const info = await inspectProcess(pid, this.procfs).catch(() => undefined);
    // Kernel threads have an empty command line; a process that restarted in between is taken at the next scan.
    if (!info || info.cmdline.length === 0 || info.startTicks !== startTicks) return { pid, startTicks };
    return { pid, startTicks, info };
  }
}

// Which processes a watch rule applies to, found again on every scan so that a restarted app (a new PID, or the same
// PID with a new start time) is picked up. Takes /proc and a rule's filters; gives the matching processes. A scan
// reads /proc/PID/stat of each process (to tell a reused PID); a process is inspected in full (maps, environment, to
// know its runtime) once, when first seen, and remembered by PID and start time, so an idle watch costs one small read
// per process and scan.
import { basename } from 'node:path';
import { processNames } from '../target/discover.js';
import { inspectProcess, type TargetInfo } from '../target/inspect.js';
import {
  listPids,
  ownPid,
  parseNulList,
  parseStat,
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
  /** Times inspected: a process is looked at again on its first scans until it shows as .NET (see scan). */
  inspections: number;
}

/** Bounds on what one scan looks at: a sidecar sees a handful of processes, a host a few thousand. */
export const scanLimits = Object.freeze({ maxProcesses: 4096, maxInspectedPerScan: 64, maxInspections: 3 });

const key = (pid: number, startTicks: number) => `${pid}:${startTicks}`;

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

export class ProcessScanner {
  /** Inspections by pid:startTicks, of the processes alive at the last scan. */
  private known = new Map<string, SeenProcess>();
  private self: number | undefined;

  constructor(private readonly procfs: ProcfsOptions) {}

  /**
   * Every visible user-space process but this one and its children (perf); those that may match one of `filters`
   * are inspected, once each. New processes beyond maxInspectedPerScan wait for the next scan.
   */
  async scan(filters: readonly Filters[]): Promise<SeenProcess[]> {
    this.self ??= await ownPid(this.procfs);
    const pids = (await listPids(this.procfs)).slice(0, scanLimits.maxProcesses);
    const next = new Map<string, SeenProcess>();
    let inspected = 0;
    for (const pid of pids) {
      if (pid === this.self) continue;
      const statText = await readProcText(pid, 'stat', this.procfs).catch(() => undefined);
      const stat = statText === undefined ? undefined : parseStat(statText);
      if (!stat || statText === undefined) continue;
      const id = key(pid, stat.startTicks);
      let seen = this.known.get(id);
      // A .NET app maps libcoreclr.so some time after it starts: a process not (yet) seen as .NET is inspected again
      // on its first scans.
      const again = seen && seen.info?.runtime !== 'dotnet' && seen.inspections < scanLimits.maxInspections;
      if (!seen || again) {
        if (inspected >= scanLimits.maxInspectedPerScan) {
          if (seen) next.set(id, seen);
          continue;
        }
        const comm = statText.slice(statText.indexOf('(') + 1, statText.lastIndexOf(')'));
        const cmdline = parseNulList((await readProcText(pid, 'cmdline', this.procfs).catch(() => undefined)) ?? '');
        // Kernel threads have no command line; a process no filter can match is never inspected.
        if (cmdline.length === 0 || !filters.some((f) => mayMatch(f, pid, comm, cmdline))) {
          next.set(id, { pid, startTicks: stat.startTicks, inspections: scanLimits.maxInspections });
          continue;
        }
        inspected++;
        seen = { ...(await this.inspect(pid, stat.startTicks)), inspections: (seen?.inspections ?? 0) + 1 };
      }
      next.set(id, seen);
    }
    this.known = next;
    return [...next.values()];
  }

  private async inspect(pid: number, startTicks: number): Promise<Omit<SeenProcess, 'inspections'>> {
    const status = await readStatus(pid, this.procfs).catch(() => undefined);
    // perf and whatever else this watch started are not targets.
    if (!status || status.ppid === this.self) return { pid, startTicks };
    const info = await inspectProcess(pid, this.procfs).catch(() => undefined);
    // Kernel threads have an empty command line; a process that restarted in between is taken at the next scan.
    if (!info || info.cmdline.length === 0 || info.startTicks !== startTicks) return { pid, startTicks };
    return { pid, startTicks, info };
  }
}

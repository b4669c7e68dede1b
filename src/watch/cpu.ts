// A process's CPU use over a sliding window, from /proc/PID/stat (utime + stime, in clock ticks): nothing is sent to
// the process. Takes samples (time, ticks) as the watch polls; gives the average share of one core over the last
// `windowMs`, once the samples cover that window. Also the CPU quota of the process's cgroup v2 (`cpu.max`), in cores,
// for triggers expressed as a share of the container's quota.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { readPathCapped } from '../files/bounded-read.js';
import { cgroupMounts, parseCgroupV2 } from '../perf/record-scope.js';
import { clockTicksPerSecond, readProcText, readStat, type ProcfsOptions } from '../target/procfs.js';

interface Sample {
  atMs: number;
  ticks: number;
}

/** Samples of one process's CPU ticks, kept for one window (and one sample before it). */
export class CpuWindow {
  private readonly samples: Sample[] = [];

  constructor(readonly windowMs: number) {}

  add(atMs: number, ticks: number): void {
    const last = this.samples.at(-1);
    // A counter that went back is another process (a reused PID): start again.
    if (last && (ticks < last.ticks || atMs <= last.atMs)) this.samples.length = 0;
    this.samples.push({ atMs, ticks });
    // Keep the newest sample at or before the window's start, and those after it.
    while (this.samples.length > 2 && this.samples[1]!.atMs <= atMs - this.windowMs) this.samples.shift();
  }

  /** Forget what was seen: after an action, the next trigger needs a whole window of its own. */
  clear(): void {
    this.samples.length = 0;
  }

  /**
   * The average share of one core (1 = a whole core) over the window ending at the last sample, or undefined while
   * the samples cover less than the window.
   */
  share(): number | undefined {
    const last = this.samples.at(-1);
    const first = this.samples[0];
    if (!last || !first || last.atMs - first.atMs < this.windowMs) return undefined;
    // The first sample may lie before the window: the average over first..last is as close as the samples allow.
    return (last.ticks - first.ticks) / clockTicksPerSecond / ((last.atMs - first.atMs) / 1000);
  }
}

/** utime + stime of the process in clock ticks, and its start time (to tell a reused PID); undefined once gone. */
export async function cpuTicks(
  pid: number,
  options: ProcfsOptions = {},
): Promise<{ ticks: number; startTicks: number } | undefined> {
  const stat = await readStat(pid, options).catch(() => undefined);
  if (!stat || !Number.isSafeInteger(stat.utimeTicks) || !Number.isSafeInteger(stat.stimeTicks)) return undefined;
  return { ticks: stat.utimeTicks + stat.stimeTicks, startTicks: stat.startTicks };
}

/** Parses cgroup v2 `cpu.max` (`QUOTA PERIOD` or `max PERIOD`): the quota in cores, undefined when unlimited. */
export function parseCpuMax(text: string): number | undefined {
  const match = /^(max|\d+)\s+(\d+)\s*$/.exec(text.trim());
  if (!match || match[1] === 'max' || Number(match[2]) === 0) return undefined;
  return Number(match[1]) / Number(match[2]);
}

/**
 * The CPU quota of the process's cgroup, in cores: the smallest `cpu.max` from its cgroup up to the root, as the
 * kernel enforces each level. No quota anywhere (or no cgroup v2 visible): the CPUs this machine has.
 */
export async function cpuQuotaCores(
  pid: number,
  options: ProcfsOptions = {},
): Promise<{ cores: number; source: string }> {
  const machine = { cores: availableParallelism(), source: 'no CPU quota: the machine’s CPUs' };
  const text = await readProcText(pid, 'cgroup', options).catch(() => undefined);
  const path = text === undefined ? undefined : parseCgroupV2(text);
  if (path === undefined || path.startsWith('/..')) return machine;
  const procRoot = options.procRoot ?? '/proc';
  const mountinfo = await readPathCapped(join(procRoot, 'self', 'mountinfo'), { maxBytes: 4 << 20, timeoutMs: 5000 })
    .then((r) => r.bytes.toString('utf8'))
    .catch(() => '');
  const mount = cgroupMounts(mountinfo).v2;
  if (!mount) return machine;
  let best: { cores: number; source: string } | undefined;
  // A cgroup path has a few levels; the bound only guards against a forged one.
  let dir = path;
  for (let level = 0; level < 64; level++) {
    const file = join(mount, dir, 'cpu.max');
    const cores = await readPathCapped(file, { maxBytes: 256, timeoutMs: 5000 })
      .then((r) => parseCpuMax(r.bytes.toString('utf8')))
      .catch(() => undefined);
    if (cores !== undefined && (!best || cores < best.cores)) best = { cores, source: `${file}` };
    if (dir === '/' || dir === '') break;
    dir = dir.slice(0, dir.lastIndexOf('/')) || '/';
  }
  return best ?? machine;
}

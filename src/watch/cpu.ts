// A process's CPU use over a sliding window, from /proc/PID/stat (utime + stime, in clock ticks): nothing is sent to
// the process. Takes samples (time, ticks) as the watch polls; gives the average share of one core over the last
// `windowMs`, once the samples cover that window. Also the CPU quota of the process's cgroup (v2 `cpu.max`, or the v1
// cpu controller's CFS quota), in cores, for triggers expressed as a share of the container's quota.
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { readPathCapped } from '../files/bounded-read.js';
import { cgroupMounts, parseCgroupV2 } from '../perf/record-scope.js';
import { clockTicksPerSecond, readProcText, readStat, type ProcfsOptions } from '../target/procfs.js';

interface Sample {
  atMs: number;
  ticks: number;
}

const maxSamplesPerWindow = 256;

/** Samples of one process's CPU ticks, kept for one window (and one sample before it). */
export class CpuWindow {
  private readonly samples: Sample[] = [];

  constructor(readonly windowMs: number) {}

  add(atMs: number, ticks: number): void {
    const last = this.samples.at(-1);
    // A counter that went back is another process (a reused PID): start again.
    if (last && (ticks < last.ticks || atMs <= last.atMs)) this.samples.length = 0;
    // At most about 256 samples a window, whatever the window and the polling: a sample closer than window/256 to
    // the one before the last replaces the last (only the window's ends count).
    const beforeLast = this.samples.at(-2);
    if (beforeLast && atMs - beforeLast.atMs < this.windowMs / maxSamplesPerWindow)
      this.samples[this.samples.length - 1] = { atMs, ticks };
    else this.samples.push({ atMs, ticks });
    // Keep the newest sample at or before the window's start, and those after it.
    while (this.samples.length > 2 && this.samples[1]!.atMs <= atMs - this.windowMs) this.samples.shift();
  }

  /** Samples kept. */
  get size(): number {
    return this.samples.length;
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

/** Parses cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`: the quota in cores, undefined when unlimited (-1). */
export function parseCfsQuota(quota: string, period: string): number | undefined {
  const [q, p] = [Number(quota.trim()), Number(period.trim())];
  return Number.isSafeInteger(q) && Number.isSafeInteger(p) && q > 0 && p > 0 ? q / p : undefined;
}

/** The cgroup v1 `cpu` controller's path in /proc/PID/cgroup text (`4:cpu,cpuacct:/path`), if any. */
export function parseCgroupV1Cpu(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const match = /^\d+:([^:]*):(.*)$/.exec(line);
    if (match && match[1]!.split(',').includes('cpu')) return match[2];
  }
  return undefined;
}

/** Where the cgroup v1 `cpu` controller is mounted, from /proc/self/mountinfo text. */
export function cpuV1Mount(mountinfo: string): string | undefined {
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    const [type, , options] = (right ?? '').split(' ');
    const mountPoint = left?.split(' ')[4];
    if (type === 'cgroup' && mountPoint && options?.split(',').includes('cpu'))
      return mountPoint.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
  }
  return undefined;
}

/** The folders from `path` up to its hierarchy's root (a path has a few levels; the bound guards a forged one). */
function upwards(path: string): string[] {
  const dirs: string[] = [];
  for (let dir = path; dirs.length < 64; dir = dir.slice(0, dir.lastIndexOf('/')) || '/') {
    dirs.push(dir);
    if (dir === '/' || dir === '') break;
  }
  return dirs;
}

const readSmall = (file: string) =>
  readPathCapped(file, { maxBytes: 256, timeoutMs: 5000 }).then(
    (r) => r.bytes.toString('utf8'),
    () => undefined,
  );

/**
 * The CPU quota of the process's cgroup, in cores: the smallest quota from its cgroup up to the root, as the kernel
 * enforces each level: cgroup v2 `cpu.max`, else the v1 `cpu` controller's `cpu.cfs_quota_us / cpu.cfs_period_us`.
 * No quota anywhere (or no cgroup visible): the CPUs this machine has.
 */
export async function cpuQuotaCores(
  pid: number,
  options: ProcfsOptions = {},
): Promise<{ cores: number; source: string }> {
  const machine = { cores: availableParallelism(), source: 'no CPU quota: the machine’s CPUs' };
  const text = await readProcText(pid, 'cgroup', options).catch(() => undefined);
  if (text === undefined) return machine;
  const procRoot = options.procRoot ?? '/proc';
  const mountinfo = await readPathCapped(join(procRoot, 'self', 'mountinfo'), { maxBytes: 4 << 20, timeoutMs: 5000 })
    .then((r) => r.bytes.toString('utf8'))
    .catch(() => '');
  let best: { cores: number; source: string } | undefined;
  const consider = (cores: number | undefined, source: string) => {
    if (cores !== undefined && (!best || cores < best.cores)) best = { cores, source };
  };
  const v1Path = parseCgroupV1Cpu(text);
  const v1Mount = cpuV1Mount(mountinfo);
  if (v1Path !== undefined && v1Mount && !v1Path.startsWith('/..')) {
    for (const dir of upwards(v1Path)) {
      const quota = await readSmall(join(v1Mount, dir, 'cpu.cfs_quota_us'));
      const period = await readSmall(join(v1Mount, dir, 'cpu.cfs_period_us'));
      if (quota !== undefined && period !== undefined)
        consider(parseCfsQuota(quota, period), join(v1Mount, dir, 'cpu.cfs_quota_us'));
    }
    return best ?? machine;
  }
  const v2Path = parseCgroupV2(text);
  const v2Mount = cgroupMounts(mountinfo).v2;
  if (v2Path === undefined || !v2Mount || v2Path.startsWith('/..')) return machine;
  for (const dir of upwards(v2Path)) {
    const text = await readSmall(join(v2Mount, dir, 'cpu.max'));
    if (text !== undefined) consider(parseCpuMax(text), join(v2Mount, dir, 'cpu.max'));
  }
  return best ?? machine;
}

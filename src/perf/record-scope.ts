// What perf record watches: the target process (`-p PID`), or every CPU filtered to the target's cgroup (`-a -G`).
// Takes perf's version and the target's cgroup; gives the scope and why. perf before 7.2 spins, up to a core per loop,
// once a thread it watched with -p has exited (the thread's fds stay in its poll array and report POLLHUP at once:
// measured with 6.1, 6.12 and 7.1 on a .NET service, whose thread pool ends threads all the time, as 5-8 s of CPU in
// a 10 s recording and a third of the service's throughput). Recording per CPU filtered to a cgroup has no per-thread
// fds and does not spin, so it is chosen where perf spins and the target has a cgroup of its own that perf can name.
// Other processes of that cgroup are recorded too; post-processing keeps the target's samples (perf script --pid).
import { readFile } from 'node:fs/promises';
import { stat } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import { readProcText, type ProcfsOptions } from '../target/procfs.js';
import { versionAtLeast } from './version.js';

export type RecordScope =
  { kind: 'process' } | { kind: 'cgroup'; /** The name perf -G takes (under its mount). */ cgroup: string };

/** perf versions before 7.2 spin after a watched thread exits (FACTS.md §7). */
export function spinsWhenThreadsExit(perfVersion: string): boolean {
  return /^\d+\.\d+/.test(perfVersion) && !versionAtLeast(perfVersion, 7, 2);
}

/** The target's cgroup as perf -G can name it, or why there is none. */
export type TargetCgroup = { cgroup: string; path: string } | { why: string };

/** The cgroup v2 path in /proc/PID/cgroup text (`0::/path`), if any. */
export function parseCgroupV2(text: string): string | undefined {
  return /^0::(\S*)$/m.exec(text)?.[1];
}

/** Mount points by file system type, from /proc/self/mountinfo text (the first of each type). */
export function cgroupMounts(mountinfo: string): { v2?: string; perfEventV1?: string } {
  const found: { v2?: string; perfEventV1?: string } = {};
  for (const line of mountinfo.split('\n')) {
    const [left, right] = line.split(' - ');
    const mountPoint = left?.split(' ')[4];
    const [type, , options] = (right ?? '').split(' ');
    if (!mountPoint) continue;
    if (type === 'cgroup2') found.v2 ??= unescapeMount(mountPoint);
    if (type === 'cgroup' && options?.split(',').includes('perf_event'))
      found.perfEventV1 ??= unescapeMount(mountPoint);
  }
  return found;
}

function unescapeMount(path: string): string {
  return path.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8)));
}

/** Finds the target's own cgroup v2, where perf (which looks for the same mounts) can name it with -G. */
export async function findTargetCgroup(pid: number, options: ProcfsOptions = {}): Promise<TargetCgroup> {
  const text = await readProcText(pid, 'cgroup', options).catch(() => undefined);
  const path = text === undefined ? undefined : parseCgroupV2(text);
  if (path === undefined) return { why: 'its cgroup v2 is not readable' };
  if (path === '/') return { why: 'it runs in the root cgroup, shared with every process' };
  if (path.startsWith('/..')) return { why: `its cgroup (${path}) lies outside this cgroup namespace` };
  const procRoot = options.procRoot ?? '/proc';
  const mounts = cgroupMounts(await readFile(`${procRoot}/self/mountinfo`, 'utf8').catch(() => ''));
  // perf takes a v1 perf_event hierarchy over cgroup v2 when both are mounted: the v2 path would not name it there.
  if (mounts.perfEventV1) return { why: 'a cgroup v1 perf_event hierarchy is mounted, which perf would use instead' };
  if (!mounts.v2) return { why: 'cgroup v2 is not mounted here' };
  const dir = `${mounts.v2}${path}`;
  if (
    !(await stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  )
    return { why: `${dir} is not visible here` };
  return { cgroup: path.slice(1), path };
}

export interface ScopeChoice {
  scope: RecordScope;
  /** One sentence saying why. */
  reason: string;
  /** The perf at hand spins on exited threads (said whatever was chosen, unless the user chose). */
  spins: boolean;
}

/**
 * The scope to record with: `wanted` is --scope (auto: the cgroup where perf spins and the target has one); `known`
 * is the target's cgroup when the caller has looked it up already (preflight does, for doctor's check).
 */
export async function chooseScope(
  wanted: 'auto' | 'process' | 'cgroup',
  perfVersion: string | undefined,
  pid: number,
  options: ProcfsOptions = {},
  known?: TargetCgroup,
): Promise<ScopeChoice> {
  const spins = wanted === 'auto' && perfVersion !== undefined && spinsWhenThreadsExit(perfVersion);
  if (wanted === 'process') return { scope: { kind: 'process' }, reason: '--scope process', spins: false };
  if (wanted === 'auto' && !spins)
    return { scope: { kind: 'process' }, reason: `perf ${perfVersion ?? '?'} records the process`, spins };
  const found = known ?? (await findTargetCgroup(pid, options));
  if (wanted === 'cgroup') {
    if (!('cgroup' in found))
      throw new ProfcpuError(
        'PREFLIGHT_FAILED',
        `--scope cgroup: the target's cgroup cannot be recorded: ${found.why}`,
        {
          remedy: 'Use --scope process, or run the target in a cgroup of its own (a container, a systemd service).',
        },
      );
    return { scope: { kind: 'cgroup', cgroup: found.cgroup }, reason: `--scope cgroup: ${found.path}`, spins: false };
  }
  if ('cgroup' in found) {
    return {
      scope: { kind: 'cgroup', cgroup: found.cgroup },
      reason:
        `perf ${perfVersion} spins once a thread it watches exits, so every CPU is recorded filtered to the ` +
        `target's cgroup ${found.path}, which does not`,
      spins,
    };
  }
  return {
    scope: { kind: 'process' },
    reason:
      `perf ${perfVersion} spins once a thread it watches exits (up to a core or two while the target's threads come ` +
      `and go), and recording per cgroup instead is not possible: ${found.why}`,
    spins,
  };
}

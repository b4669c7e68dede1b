// What a collect session takes: one options type, its frozen defaults (each documented), and the default output
// folder name, `profilings/HH-MM-SS_YYYY-MM-DD` under the working directory as the original tool named it.
import { join } from 'node:path';
import type { UnwindRequest } from './unwind-choice.js';
import type { SwitchShareRequest } from './switch-share.js';

export interface CollectOptions {
  /** The process to profile. Default: see `name`, else the only .NET process visible, else PID 1. */
  pid?: number;
  /** Pick the process by name (comm, executable, or a .NET app's dll name) instead of by PID. */
  name?: string;
  /** Recording length in seconds. */
  durationSeconds: number;
  /** Sampling frequency in Hz. */
  frequency: number;
  /**
   * How user stacks are unwound: `fp`, by frame pointer as perf records them (cheap; a frame in code built without
   * frame pointers, glibc's and most native libraries', loses its callers); `mixed`, from a copy of the top
   * `stackBytes` of each sample's stack, by the code's CFI where it has some and by frame pointers through JIT code
   * (postprocess's built-in engine does it: src/engine/unwind/); `auto`, mixed where it pays (unwind-choice.ts).
   */
  unwind: UnwindRequest;
  /** The stack copied in each sample when unwinding is mixed, in bytes. */
  stackBytes: number;
  /**
   * Record the target's time off the CPU as well (every switch of its threads, with the stack it blocked at): the
   * off-CPU flame graph beside the CPU one (src/engine/offcpu/). Default false.
   */
  offCpu: boolean;
  /** Stretches off the CPU shorter than this many microseconds are left out of the off-CPU profile, counted. */
  minBlockUs: number;
  /**
   * With offCpu and mixed unwinding: the stack copied at each switch off the CPU, in bytes. Default: switchStackBytes
   * (src/perf/record.ts, 8 KiB), or stackBytes when that is smaller.
   */
  switchStackBytes?: number;
  /**
   * With offCpu: the share of the time (above 0, up to 1) the switches' stacks are taken, in random windows; each
   * thread's time blocked is measured whole all the same (src/perf/record.ts, SwitchWindows). `auto`: all of it for a
   * target that blocks up to 2 000 times a second, less above (switch-share.ts).
   */
  switchShare: SwitchShareRequest;
  /** perf event. Default: hardware `cycles` where it counts, else `cpu-clock`. */
  event?: string;
  /** Output folder. Default `profilings/HH-MM-SS_YYYY-MM-DD` under the working directory. */
  output?: string;
  /**
   * What perf watches: `process` (-p), `cgroup` (every CPU filtered to the target's cgroup, -a -G), or `auto`: the
   * cgroup where the perf at hand spins on exited threads and the target has a cgroup of its own (record-scope.ts).
   */
  scope: 'auto' | 'process' | 'cgroup';
  /** Run the postprocess pipeline after recording. */
  postprocess: boolean;
  /** How often the target's perf map, jitdump and maps are re-copied while recording, in ms. */
  snapshotIntervalMs: number;
  /** How often progress is reported while recording, in ms. */
  progressIntervalMs: number;
  /**
   * Bytes copied from the target's perf map and from its jitdump at most. A big service's map is tens of MB; the
   * cap only stops a hostile (or broken) target from filling the disk.
   */
  snapshotMaxBytes: number;
  /**
   * Seconds one pass reading the target's files or memory (a step's, a snapshot) may take. Past it, the process
   * reading them is killed (a read that never returns, e.g. from a FUSE mount the target serves, can be ended no
   * other way) and nothing more is read from the target in this session.
   */
  targetTimeoutSeconds: number;
  /** The perf executable. */
  perfPath: string;
  /** Where procfs is mounted. */
  procRoot: string;
  /** Who the output folder is given to at the end (the user who ran the launcher). Default: left as created. */
  owner?: { uid: number; gid: number };
  /**
   * The launcher's name for this run, written into target.json (`launcherRun`), so that a launcher finishing folders
   * its killed sidecar left knows its own from another run's in the same results folder. Default: none.
   */
  launcherRun?: string;
}

export const collectDefaults: Readonly<CollectOptions> = Object.freeze({
  durationSeconds: 10,
  frequency: 99,
  unwind: 'auto',
  // Deep enough for every stack of the .NET fixtures and of an ASP.NET Core service with EF Core over SQLite under load
  // (16 KiB left 0.6% and 2.6% of their samples cut, in the GC's and the JIT's deepest frames); perf's default is 8192.
  stackBytes: 32768,
  scope: 'auto',
  offCpu: false,
  // bcc's offcputime's default: the switches of a lock handed over at once weigh nothing, and are most of them.
  minBlockUs: 1,
  switchShare: 'auto',
  postprocess: true,
  // Often enough that a target exiting mid-recording leaves a copy at most a second old; a copy happens only when
  // the file changed, so a quiet target costs one stat per file.
  snapshotIntervalMs: 1000,
  progressIntervalMs: 1000,
  snapshotMaxBytes: 256 << 20,
  // Above every deadline inside the passes (the ReadyToRun step's 60 s, a snapshot copy's 60 s).
  targetTimeoutSeconds: 120,
  perfPath: 'perf',
  procRoot: '/proc',
});

const pad = (n: number) => String(n).padStart(2, '0');

/** `profilings/HH-MM-SS_YYYY-MM-DD` under `cwd`, in local time. */
export function defaultOutputDir(cwd: string, now: Date): string {
  const time = `${pad(now.getHours())}-${pad(now.getMinutes())}-${pad(now.getSeconds())}`;
  const date = `${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}`;
  return join(cwd, 'profilings', `${time}_${date}`);
}

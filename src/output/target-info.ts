// What an output folder says about its target: `target/target.json` (written by collect) in, the PIDs and runtime
// that post-processing needs out. The folder may come from anybody: the file is read without following links and
// up to 1 MiB, and every field is checked; a missing or unusable file gives undefined (with a warning when it is
// there but unusable).
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import type { OutputFolder } from '../files/output-folder.js';
import { layout } from './layout.js';

export interface TargetIds {
  /** The target's PID as perf saw it (the one in perf.data). */
  pid: number;
  /** Its PID inside its own PID namespace (the number in its perf map's name). */
  nspid: number;
  /** `dotnet`, `node` or `other`, when the file says. */
  runtime?: string;
  /** perf recorded the target's cgroup (other processes too): its samples are the ones with `pid`. */
  recordedCgroup?: boolean;
  /** The target's command name (/proc/PID/comm), when the file says. */
  comm?: string;
  /** The container's id, when the recorded cgroup's name holds one (`docker-<64 hex>.scope`, `cri-containerd-...`). */
  containerId?: string;
}

/** Largest target.json read: collect writes a few hundred bytes. */
const maxBytes = 1 << 20;

export async function readTargetIds(folder: OutputFolder, warn: Warn = ignoreWarnings): Promise<TargetIds | undefined> {
  let text: string;
  try {
    const read = await folder.read(layout.targetInfo, { maxBytes, timeoutMs: 10_000 });
    if (read.truncated) {
      warn(`${layout.targetInfo} is larger than ${maxBytes} bytes: ignored`);
      return undefined;
    }
    text = read.bytes.toString('utf8');
  } catch {
    return undefined;
  }
  let info: unknown;
  try {
    info = JSON.parse(text);
  } catch {
    warn(`${layout.targetInfo} is not valid JSON: ignored`);
    return undefined;
  }
  const { pid, nspid, runtime, recordScope, comm } = (info ?? {}) as Record<string, unknown>;
  if (!isPid(pid)) {
    warn(`${layout.targetInfo} has no usable "pid": ignored`);
    return undefined;
  }
  const scope = recordScope as { kind?: unknown; cgroup?: unknown } | null | undefined;
  const cgroup = scope?.kind === 'cgroup';
  const containerId = typeof scope?.cgroup === 'string' ? containerIdOf(scope.cgroup) : undefined;
  return {
    pid,
    nspid: isPid(nspid) ? nspid : pid,
    ...(typeof runtime === 'string' && { runtime }),
    ...(typeof comm === 'string' && comm.length <= 64 && { comm }),
    ...(cgroup && { recordedCgroup: true }),
    ...(containerId && { containerId }),
  };
}

/**
 * The container id a cgroup's name holds, as Docker, containerd, CRI-O and Podman name theirs: 64 hex digits ending
 * the last component (`docker-<id>.scope`, `cri-containerd-<id>.scope`, `/docker/<id>`, `/kubepods/.../<id>`).
 */
export function containerIdOf(cgroup: string): string | undefined {
  const last = cgroup.slice(cgroup.lastIndexOf('/') + 1);
  return /(?:^|[-:])([0-9a-f]{64})(?:\.scope)?$/.exec(last)?.[1];
}

function isPid(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value > 0;
}

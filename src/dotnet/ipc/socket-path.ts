// Where a .NET process listens for diagnostic IPC: a pid in, the path of its `dotnet-diagnostic-<nspid>-<key>-socket`
// out, reached through /proc/PID/root so it works from a sidecar sharing only the PID namespace. The runtime names
// the socket after its namespace pid and its start time in clock ticks, in its own $TMPDIR (else /tmp).
// The target decides what its $TMPDIR and that folder hold, so the folder is looked up inside its root only and the
// socket handed out as a `/proc/self/fd/N` path to the very socket inode checked (owned by the target's user): a link
// to a socket of the sidecar's, or one swapped in later, is never connected to. That path is short, too, so the
// 108-byte sun_path limit never bites.
import { ProfcpuError } from '../../error.js';
import { isMissing, RootedPathError } from '../../files/rooted.js';
import {
  parseEnviron,
  parseNulList,
  pathInTarget,
  processStartMs,
  readProcText,
  readStat,
  readStatus,
} from '../../target/procfs.js';
import { stallingFileSystemAt } from '../../target/mounts.js';
import { TargetFiles } from '../../target/target-files.js';

export interface FindSocketOptions {
  /** Where procfs is mounted. Default `/proc`. */
  procRoot?: string;
}

export interface DiagnosticSocket {
  /** A path reaching exactly the socket found (`/proc/self/fd/N`), valid until release(). */
  path: string;
  /** The socket's path as it looked from here (under /proc/PID/root), for messages. */
  hostPath: string;
  pid: number;
  /** The pid inside the target's PID namespace, which names its socket, perf map and jitdump. */
  nspid: number;
  /** The target's temp directory inside its own mount namespace. */
  tmpDir: string;
  /** The target's environment when readable (undefined when /proc/PID/environ is not). */
  environment: Map<string, string> | undefined;
  /** Lets go of the socket (`path` stops working). Idempotent. */
  release(): Promise<void>;
}

/**
 * What users set on the target when profcpu cannot switch perf maps on. Seen with .NET 10.0.12: a jitdump enabled
 * at startup stops during startup (the runtime closes it when a 64 KiB stub block cannot be copied whole) unless
 * stubs are logged one by one (granularity 2, which also names them; 4 would stop logging stubs at all).
 */
export const perfMapVariable = 'DOTNET_PerfMapEnabled=1 DOTNET_PerfMapStubGranularity=2';

function unreachable(message: string, remedy: string, cause?: unknown): ProfcpuError {
  return new ProfcpuError('IPC_UNREACHABLE', message, { remedy, cause });
}

function errnoCode(error: unknown): string | undefined {
  return (error as NodeJS.ErrnoException | undefined)?.code;
}

/** Reads the target's environment; undefined when we may not (another user's process without CAP_SYS_PTRACE). */
export async function readEnvironment(
  pid: number,
  options: FindSocketOptions = {},
): Promise<Map<string, string> | undefined> {
  try {
    const text = await readProcText(pid, 'environ', options);
    return text === undefined ? undefined : parseEnviron(parseNulList(text));
  } catch (error) {
    if (errnoCode(error) === 'EACCES' || errnoCode(error) === 'EPERM') return undefined;
    throw error;
  }
}

/** The runtime reads DOTNET_ first, then the legacy COMPlus_ prefix. */
export function runtimeSetting(environment: Map<string, string> | undefined, name: string): string | undefined {
  return environment?.get(`DOTNET_${name}`) ?? environment?.get(`COMPlus_${name}`);
}

/** Finds the diagnostic socket of `pid`; throws NO_TARGET or IPC_UNREACHABLE (with the reason) when there is none. */
export async function findDiagnosticSocket(pid: number, options: FindSocketOptions = {}): Promise<DiagnosticSocket> {
  const [status, procStat] = await Promise.all([readStatus(pid, options), readStat(pid, options)]);
  if (status === undefined || procStat === undefined) {
    throw new ProfcpuError('NO_TARGET', `process ${pid} does not exist`, {
      remedy: 'Check the pid with `profcpu ps`; the process may have exited.',
    });
  }
  const nspid = status.nspids.at(-1) ?? pid;
  const environment = await readEnvironment(pid, options);
  const disabled = ['EnableDiagnostics', 'EnableDiagnostics_IPC'].find((n) => runtimeSetting(environment, n) === '0');
  if (disabled) {
    throw unreachable(
      `process ${pid} runs with DOTNET_${disabled}=0: its diagnostic IPC is switched off`,
      `Restart it without that variable, or with ${perfMapVariable} so perf maps need no IPC.`,
    );
  }
  const tmpDir = environment?.get('TMPDIR') || '/tmp';
  const dir = pathInTarget(pid, tmpDir, options);
  // Listing that folder, or connecting to a socket in it, on a FUSE or network file system could wait for good (its
  // server may be the target) in a thread no deadline frees; connect(2) would even block the event loop.
  const stalling = await stallingFileSystemAt(pid, tmpDir, options);
  if (stalling)
    throw unreachable(
      `process ${pid}'s temp folder ${tmpDir} is on a ${stalling} file system, whose server could stall profcpu for good: its diagnostic socket is not looked for`,
      'Point the app’s TMPDIR at a local folder (a tmpfs or the container’s own disk), or start it with ' +
        `${perfMapVariable} so no IPC is needed.`,
    );
  const files = await TargetFiles.open(pid, { ...options, uid: status.uid.effective }).catch((error: unknown) => {
    throw unreachable(`cannot look into the file system of process ${pid}`, lookRemedy, error);
  });
  try {
    let names: string[];
    try {
      names = (await files.list(tmpDir)).names;
    } catch (error) {
      if (error instanceof RootedPathError && !isMissing(error) && /permission|refused/.test(error.reason))
        throw unreachable(`cannot look into ${dir} (${error.reason})`, lookRemedy, error);
      throw unreachable(`process ${pid} has no temp directory ${tmpDir} visible at ${dir}`, notDotnetRemedy, error);
    }
    const pattern = new RegExp(`^dotnet-diagnostic-${nspid}-(\\d+)-socket$`);
    const candidates = names.filter((n) => pattern.test(n)).sort();
    if (candidates.length === 0) {
      throw unreachable(
        `process ${pid} has no diagnostic socket dotnet-diagnostic-${nspid}-*-socket in ${dir}`,
        notDotnetRemedy,
      );
    }
    // The key is the start time, so an exact match is this process even when stale sockets of an earlier process with
    // the same namespace pid linger (PID 1 in every container); otherwise the newest one.
    const exact = candidates.find((n) => pattern.exec(n)?.[1] === String(procStat.startTicks));
    // A socket older than the process is an earlier process's, left behind: never this one's.
    const name = exact ?? (await newest(files, tmpDir, candidates, await processStartMs(procStat.startTicks, options)));
    if (name === undefined)
      throw unreachable(
        `process ${pid} has no diagnostic socket in ${dir}: the dotnet-diagnostic-${nspid}-*-socket there are older than the process (left by an earlier one)`,
        notDotnetRemedy,
      );
    const handle = await files.lookup(`${tmpDir}/${name}`, 'socket').catch((error: unknown) => {
      const why = error instanceof RootedPathError ? error.reason : String(error);
      throw unreachable(`${dir}/${name} cannot be used as a diagnostic socket: ${why}`, notDotnetRemedy, error);
    });
    return {
      path: handle.kernelPath,
      hostPath: `${dir}/${name}`,
      pid,
      nspid,
      tmpDir,
      environment,
      release: () => handle.close(),
    };
  } finally {
    await files.close();
  }
}

const lookRemedy = 'Run profcpu as root or as the target’s user (reading /proc/PID/root needs ptrace access).';

const notDotnetRemedy = `Is it a .NET (Core 3.0 or later) process? If it is, its diagnostics may be off (DOTNET_EnableDiagnostics=0) or its $TMPDIR differ; start it with ${perfMapVariable} so perf maps need no IPC.`;

/** The newest of `names`, not older than `notBeforeMs` (2 s of clock granularity allowed) when given. */
async function newest(
  files: TargetFiles,
  dir: string,
  names: readonly string[],
  notBeforeMs?: number,
): Promise<string | undefined> {
  const mtime = async (name: string) => {
    const handle = await files.lookup(`${dir}/${name}`, 'socket').catch(() => undefined);
    await handle?.close();
    return handle?.stat.mtimeMs ?? -1;
  };
  // A handful in practice; a hostile folder full of candidates is looked at up to a point.
  const stamped = await Promise.all(names.slice(0, 64).map(async (name) => ({ name, mtime: await mtime(name) })));
  stamped.sort((a, b) => b.mtime - a.mtime || (a.name < b.name ? -1 : 1));
  // When none can be looked at (another user's, not a socket), the first is given: its lookup then says why.
  const usable = stamped.filter((s) => s.mtime >= 0);
  if (usable.length === 0) return stamped[0]?.name;
  const recent = notBeforeMs === undefined ? usable : usable.filter((s) => s.mtime >= notBeforeMs - 2000);
  return recent[0]?.name;
}

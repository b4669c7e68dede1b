// The diagnostic IPC commands profcpu sends, and nothing else (the socket also grants code execution, so the
// client offers no generic "send"): a pid or socket path in, ProcessInfo, an acknowledged perf-map switch or a
// written dump out.
import { ProfcpuError } from '../../error.js';
import {
  decodeDumpReply,
  dumpCommandVersions,
  encodeGenerateCoreDumpRequest,
  type DumpCommandVersion,
  type DumpTypeName,
} from './dump-protocol.js';
import {
  decodeProcessInfo,
  decodeServerReply,
  encodeDisablePerfMapRequest,
  encodeEnablePerfMapRequest,
  encodeProcessInfo2Request,
  encodeProcessInfoRequest,
  perfMapType,
  type PerfMapType,
  type ProcessInfo,
} from './protocol.js';
import { findDiagnosticSocket, type FindSocketOptions } from './socket-path.js';
import { exchange, type IpcCallOptions } from './transport.js';

/** A process id (its socket is looked up) or the path of a diagnostic socket. */
export type IpcTarget = number | string;

export interface IpcOptions extends IpcCallOptions, FindSocketOptions {}

export const enablePerfMapDefaults = Object.freeze({
  /** Perf map and jitdump, as DOTNET_PerfMapEnabled=1: the jitdump also names ReadyToRun framework code. */
  type: perfMapType.all as PerfMapType,
  /** Enabling replays every method compiled so far before answering, which takes a while in a big app. */
  timeoutMs: 30_000,
});

/** Runs `work` with the socket's path; a socket looked up by pid is let go of afterwards. */
async function withSocket<T>(target: IpcTarget, options: IpcOptions, work: (path: string) => Promise<T>): Promise<T> {
  if (typeof target === 'string') return work(target);
  const socket = await findDiagnosticSocket(target, options);
  try {
    return await work(socket.path);
  } finally {
    await socket.release();
  }
}

/** ProcessInfo2 (with entrypoint and runtime version), or ProcessInfo on runtimes that predate it (.NET 5). */
export async function getProcessInfo(
  target: IpcTarget,
  options: IpcOptions = {},
): Promise<ProcessInfo & { version: 1 | 2 }> {
  return withSocket(target, options, async (socket) => {
    try {
      const reply = await exchange(socket, encodeProcessInfo2Request(), options);
      return { ...decodeProcessInfo(decodeServerReply(reply.header, reply.payload, 'ProcessInfo2'), 2), version: 2 };
    } catch (error) {
      if (!(error instanceof ProfcpuError && error.code === 'IPC_UNSUPPORTED')) throw error;
    }
    const reply = await exchange(socket, encodeProcessInfoRequest(), options);
    return { ...decodeProcessInfo(decodeServerReply(reply.header, reply.payload, 'ProcessInfo'), 1), version: 1 };
  });
}

/**
 * Asks the runtime to write /tmp/perf-<nspid>.map and/or /tmp/jit-<nspid>.dump from now on, replaying the methods
 * already compiled. .NET 8+; older runtimes give IPC_UNSUPPORTED.
 */
export async function enablePerfMap(
  target: IpcTarget,
  options: IpcOptions & { type?: PerfMapType } = {},
): Promise<void> {
  const type = options.type ?? enablePerfMapDefaults.type;
  if (type === perfMapType.disabled) throw new RangeError('enablePerfMap needs a type other than 0 (disabled)');
  await withSocket(target, options, async (socket) => {
    const reply = await exchange(socket, encodeEnablePerfMapRequest(type), {
      ...options,
      timeoutMs: options.timeoutMs ?? enablePerfMapDefaults.timeoutMs,
    });
    decodeServerReply(reply.header, reply.payload, 'EnablePerfMap');
  });
}

/** Stops perf map and jitdump writing; the files stay where they are. .NET 8+. */
export async function disablePerfMap(target: IpcTarget, options: IpcOptions = {}): Promise<void> {
  await withSocket(target, options, async (socket) => {
    const reply = await exchange(socket, encodeDisablePerfMapRequest(), options);
    decodeServerReply(reply.header, reply.payload, 'DisablePerfMap');
  });
}

export const writeDumpDefaults = Object.freeze({
  /** The runtime answers once createdump has finished: a full dump of a large heap takes minutes. */
  timeoutMs: 600_000,
});

/**
 * Asks the runtime to write a dump of `type` at `path` (in the target's own file system) and waits until it did;
 * gives the command version that worked. Tries GenerateCoreDump3, then 2, then 1 while the runtime answers
 * UNKNOWN_COMMAND; IPC_UNSUPPORTED when it knows none (before .NET 5), DUMP_REFUSED when it failed.
 */
export async function writeDump(
  target: IpcTarget,
  request: { path: string; type: DumpTypeName },
  options: IpcOptions & {
    /**
     * Once aborted, no further request is sent (ABORTED), but the one under way is still waited for: createdump goes
     * on writing whatever the client does, and its file can only be removed once it is written. `signal` stops at once.
     */
    noNewRequest?: AbortSignal;
  } = {},
): Promise<DumpCommandVersion> {
  return withSocket(target, options, async (socket) => {
    let unsupported: unknown;
    for (const version of dumpCommandVersions) {
      if (options.noNewRequest?.aborted)
        throw new ProfcpuError('ABORTED', 'dump request interrupted', { cause: options.noNewRequest.reason });
      const reply = await exchange(socket, encodeGenerateCoreDumpRequest(version, request.path, request.type), {
        ...options,
        timeoutMs: options.timeoutMs ?? writeDumpDefaults.timeoutMs,
      });
      try {
        decodeDumpReply(reply.header, reply.payload, version);
        return version;
      } catch (error) {
        if (!(error instanceof ProfcpuError && error.code === 'IPC_UNSUPPORTED')) throw error;
        unsupported = error;
      }
    }
    throw unsupported;
  });
}

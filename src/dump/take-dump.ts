// One `profcpu dump`: a target and a dump type in, a dump file in an output folder out, recorded in its manifest.
// The runtime writes the dump (its createdump, as the target's user, inside the target's mount namespace) at a name
// profcpu chose in the target's temp folder: unique and unguessable, so nothing there can be waiting under it; the
// file is then moved out through /proc/PID/root with the checks of fetch-dump.ts, and the target's copy is removed
// whatever happened, once the runtime has answered (interrupted while it writes, the answer is waited for, within the
// timeout). Works from a sidecar that shares only the PID namespace: no shared volume is needed.
// Also the entry point for other commands that take dumps (a `watch` action).
import { randomBytes } from 'node:crypto';
import { lstat, rmdir } from 'node:fs/promises';
import { posix, resolve } from 'node:path';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { writeDump } from '../dotnet/ipc/client.js';
import { dumpCommandName, type DumpCommandVersion, type DumpTypeName } from '../dotnet/ipc/dump-protocol.js';
import { findDiagnosticSocket } from '../dotnet/ipc/socket-path.js';
import { OutputFolder } from '../files/output-folder.js';
import { RootedPathError, type PathHandle } from '../files/rooted.js';
import { chooseTarget } from '../target/discover.js';
import type { TargetInfo } from '../target/inspect.js';
import { stallingFileSystemAt } from '../target/mounts.js';
import { TargetFiles } from '../target/target-files.js';
import { addDump, checkDumpFolder, type DumpEntry } from './dump-manifest.js';
import { dumpFetchDefaults, fetchDump, removeInTarget, type DumpFetchLimits } from './fetch-dump.js';

export interface DumpOptions {
  /** A process already inspected (a watch rule's): dumped as is, instead of looking up pid or name. */
  target?: TargetInfo;
  pid?: number;
  name?: string;
  type: DumpTypeName;
  /** The output folder (created when missing); dumps already there are kept, the manifest lists them all. */
  output: string;
  /** How long the runtime may take to write the dump, ms. Default 10 min. */
  dumpTimeoutMs: number;
  copy: DumpFetchLimits;
  procRoot: string;
  /** Who the folder is given to afterwards (the launcher's PROFCPU_OUTPUT_OWNER). */
  owner?: { uid: number; gid: number };
}

export const dumpDefaults = Object.freeze({
  type: 'full' as DumpTypeName,
  dumpTimeoutMs: 600_000,
  copy: dumpFetchDefaults,
  procRoot: '/proc',
});

export type DumpPhase = 'writing' | 'copying';

export interface DumpContext {
  /**
   * Ctrl-C: stops at once, except while the runtime writes the dump: its file is then waited for (until it answers,
   * within the timeout) so that it can be removed, since createdump goes on once asked.
   */
  signal?: AbortSignal | undefined;
  /** A second Ctrl-C: stops waiting for the runtime at once, leaving its file (the warning says where). */
  abandon?: AbortSignal | undefined;
  warn?: Warn;
  info?: (message: string) => void;
  onPhase?: (phase: DumpPhase) => void;
  onCopyProgress?: (copied: number, total: number) => void;
  now?: () => Date;
}

export interface DumpResult {
  dir: string;
  entry: DumpEntry;
  /** The dump's path. */
  path: string;
  /** Why that target was chosen. */
  reason: string;
  /** Bytes written to disk (holes skipped). */
  written: number;
}

export async function takeDump(
  partial: Partial<DumpOptions> & { output: string },
  context: DumpContext = {},
): Promise<DumpResult> {
  const options: DumpOptions = { ...dumpDefaults, ...partial, copy: { ...dumpDefaults.copy, ...partial.copy } };
  const warn = context.warn ?? ignoreWarnings;
  const info = context.info ?? (() => {});
  const procfs = { procRoot: options.procRoot };
  const query =
    options.pid !== undefined ? { pid: options.pid } : options.name !== undefined ? { name: options.name } : {};
  const { target, reason } = options.target
    ? { target: options.target, reason: 'the process was given' }
    : await chooseTarget(query, procfs);
  info(`dumping process ${target.pid} (${target.cmdline.join(' ').slice(0, 100)}): ${reason}`);
  context.signal?.throwIfAborted();

  // Everything opened below is closed in reverse order, whatever happens.
  const closers: (() => Promise<void>)[] = [];
  const dir = resolve(options.output);
  const existed = await lstat(dir).then(
    () => true,
    () => false,
  );
  let result: DumpResult | undefined;
  try {
    const socket = await findDiagnosticSocket(target.pid, procfs).catch((error: unknown) => {
      // The lookup's own remedy is about perf maps, which need no socket; a dump does.
      if (!isProfcpuError(error, 'IPC_UNREACHABLE')) throw error;
      throw new ProfcpuError('IPC_UNREACHABLE', error.message, {
        remedy:
          'A dump is asked for over the .NET diagnostic socket: the process must be .NET 5 or later with its diagnostics on (no DOTNET_EnableDiagnostics=0), and its temp folder visible through /proc/PID/root.',
        cause: error,
      });
    });
    closers.unshift(() => socket.release());
    const files = await TargetFiles.open(target.pid, { ...procfs, uid: target.uid, signal: context.signal });
    closers.unshift(() => files.close());
    const tmpDir = socket.tmpDir.startsWith('/') ? socket.tmpDir : '/tmp';
    // A dump on a FUSE or network file system could not be read back safely: its server may never answer.
    const stalling = await stallingFileSystemAt(target.pid, tmpDir, procfs);
    if (stalling)
      throw new ProfcpuError(
        'DUMP_REFUSED',
        `the target’s temp folder ${tmpDir} is on a ${stalling} file system, whose server could stall profcpu’s reads for ever`,
        { remedy: 'Point the app’s TMPDIR at a local folder (a tmpfs or the container’s own disk) and restart it.' },
      );
    const folderInTarget = await files.lookup(tmpDir, 'directory').catch((error: unknown) => {
      const why = error instanceof RootedPathError ? error.reason : String(error);
      throw new ProfcpuError('TARGET_NOT_VISIBLE', `the target’s temp folder ${tmpDir} cannot be used: ${why}`, {
        remedy: 'The runtime writes the dump there; run profcpu as root, or check the target’s TMPDIR.',
        cause: error,
      });
    });
    closers.unshift(() => folderInTarget.close());
    const folder = await OutputFolder.open(dir, { create: true });
    closers.unshift(async () => {
      // Given to the user who asked, whatever happened: a folder they cannot read or delete helps nobody.
      if (options.owner)
        await folder
          .chownTree(options.owner)
          .catch((error: unknown) => warn(`cannot give ${dir} to uid ${options.owner!.uid}: ${String(error)}`));
      await folder.close();
    });
    await checkDumpFolder(folder);
    const chosen = { target, reason, socketPath: socket.path };
    result = await dumpInto(folder, folderInTarget, tmpDir, chosen, options, { ...context, warn, info });
    return result;
  } finally {
    for (const close of closers) await close();
    // A folder this run made and nothing filled is not left behind (root's, and empty).
    if (!result && !existed) await rmdir(dir).catch(() => undefined);
  }
}

async function dumpInto(
  folder: OutputFolder,
  folderInTarget: PathHandle,
  tmpDir: string,
  chosen: { target: TargetInfo; reason: string; socketPath: string },
  options: DumpOptions,
  context: DumpContext & { warn: Warn; info: (message: string) => void },
): Promise<DumpResult> {
  const { target, reason } = chosen;
  const free = await folder.freeBytes();
  if (free < options.copy.reserveBytes)
    throw new ProfcpuError(
      'NO_SPACE',
      `${folder.path} has ${free} bytes free, less than the ${options.copy.reserveBytes} kept free`,
      {
        remedy: 'Free some space there, or give --output on a larger file system.',
      },
    );
  // Letters and digits only: createdump expands %p, %e, %h, %t and %d in the name it is given.
  const name = `profcpu-dump-${randomBytes(16).toString('hex')}.core`;
  const pathInTarget = posix.join(tmpDir, name);
  const takenAt = (context.now ?? (() => new Date()))();
  context.onPhase?.('writing');
  context.info(`the runtime is writing a ${options.type} dump to ${pathInTarget} in the target`);
  const started = performance.now();
  const version = await runtimeWrites(chosen.socketPath, folderInTarget, pathInTarget, options, context);
  const dumpMs = Math.round(performance.now() - started);
  context.onPhase?.('copying');
  // A name of its own while it is copied (and its partial file): another dump into this folder at the same time
  // never removes it; the dump's real name is given once it is complete (addDump).
  const incoming = `dump-incoming-${randomBytes(8).toString('hex')}.core`;
  const fetched = await fetchDump(folderInTarget, name, folder, incoming, {
    uid: target.uid,
    warn: context.warn,
    limits: options.copy,
    signal: context.signal,
    ...(context.onCopyProgress && { onProgress: context.onCopyProgress }),
  });
  const entry = await addDump(folder, fetched.file, {
    type: options.type,
    takenAt: takenAt.toISOString(),
    bytes: fetched.bytes,
    sha256: fetched.sha256,
    command: dumpCommandName(version),
    target: {
      pid: target.pid,
      nspid: target.nspid,
      commandLine: target.cmdline,
      ...(target.dotnet?.version !== undefined && { runtimeVersion: target.dotnet.version }),
      writtenAt: pathInTarget,
    },
    durationsMs: { dump: dumpMs, copy: fetched.copyMs },
  });
  return { dir: folder.path, entry, path: `${folder.path}/${entry.file}`, reason, written: fetched.written };
}

/**
 * Asks the runtime for the dump and waits for its answer; gives the command version that worked. Interrupted while the
 * runtime writes, it keeps the connection and waits on (within the timeout, until `abandon`) so that the file can be
 * removed once written, then rejects ABORTED. The target's file is removed whenever the dump failed.
 */
async function runtimeWrites(
  socketPath: string,
  folderInTarget: PathHandle,
  pathInTarget: string,
  options: DumpOptions,
  context: DumpContext & { warn: Warn },
): Promise<DumpCommandVersion> {
  const name = posix.basename(pathInTarget);
  const interrupt = context.signal;
  const onInterrupt = () =>
    // Not when the same signal abandons the wait too (a watch's).
    !context.abandon?.aborted &&
    context.warn(
      `waiting for the runtime to finish so its file can be removed; ${context.abandon ? `Ctrl-C again to leave it at ${pathInTarget}` : `${pathInTarget} is left there if it does not answer within the timeout`}`,
    );
  interrupt?.addEventListener('abort', onInterrupt, { once: true });
  let outcome: { version: DumpCommandVersion } | { error: unknown };
  try {
    outcome = {
      version: await writeDump(
        socketPath,
        { path: pathInTarget, type: options.type },
        {
          timeoutMs: options.dumpTimeoutMs,
          ...(context.abandon && { signal: context.abandon }),
          ...(interrupt && { noNewRequest: interrupt }),
        },
      ),
    };
  } catch (error) {
    outcome = { error };
  } finally {
    interrupt?.removeEventListener('abort', onInterrupt);
  }
  if ('version' in outcome && !interrupt?.aborted) return outcome.version;
  // Refused, interrupted, timed out or abandoned: createdump may have left a file. One still being written is freed
  // once createdump closes it; one not created yet will appear after this.
  await removeInTarget(folderInTarget, name).catch((cleanup: unknown) => context.warn(String(cleanup)));
  const error = 'error' in outcome ? outcome.error : undefined;
  // Given up on before its answer (not an interrupt that came before any request under way).
  if (isProfcpuError(error, 'IPC_TIMEOUT') || (isProfcpuError(error, 'ABORTED') && context.abandon?.aborted))
    context.warn(`the runtime may still be writing ${pathInTarget} in the target: remove it once it is done`);
  if (interrupt?.aborted)
    throw new ProfcpuError('ABORTED', 'dump interrupted while the runtime wrote it', { cause: error });
  throw error;
}

// Copies of a live target's perf map, jitdump and /proc/PID/maps into the output folder, taken repeatedly while it
// runs so the output folder can be post-processed after the target is gone. Takes the target's files (TargetFiles: every
// read inside its root, capped, under a deadline) and the output folder (OutputFolder: no write through a link);
// gives the copies and a report of each.
//
// Maps grow as code is JIT-compiled, so the latest copy is the best one; a copy only ever grows:
// - a file that grew is appended to (its last copied bytes are checked first; a mismatch means it was rewritten,
//   and it is copied whole again), so a large map costs its new lines, not its whole size, every second;
// - a dying target may delete its map (Node does) or truncate it: a smaller source never replaces the copy;
// - a file larger than the cap is copied up to the cap (once, with a warning): a hostile target cannot fill the disk;
// - holes are not written, so a sparse file stays sparse.
// Whole copies go to a `.partial` file first and are renamed into place, so the folder always holds a complete copy.
import type { FileHandle } from 'node:fs/promises';
import { layout } from '../output/layout.js';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { copyRange, openForReading, withDeadline } from '../files/bounded-read.js';
import { outputModes, type OutputFolder } from '../files/output-folder.js';
import { isMissing, RootedPathError } from '../files/rooted.js';
import type { TargetInfo } from '../target/inspect.js';
import { procPath, readProcText, type ProcfsOptions } from '../target/procfs.js';
import type { TargetFiles } from '../target/target-files.js';

export interface SnapshotOptions extends ProcfsOptions {
  /** Bytes copied from the perf map and from the jitdump at most. Default 256 MiB. */
  maxBytes: number;
  /** Time allowed for one copy, ms. Default 60 s. */
  copyTimeoutMs: number;
  /** Aborting ends a copy under way. */
  signal?: AbortSignal | undefined;
}

export const snapshotDefaults = Object.freeze({ maxBytes: 256 << 20, copyTimeoutMs: 60_000 });

export interface SnapshotFileState {
  /** Path in the output folder, relative to it. */
  file: string;
  /** Where it is copied from, as the target sees it. */
  source: string;
  /** Copies and appends made. */
  copies: number;
  bytes: number;
  /** Source mtime of the copy kept, ms since the epoch. */
  sourceMtimeMs?: number;
  /** The source was larger than the cap: only its first `bytes` were copied. */
  capped?: boolean;
  /** Why the last attempt kept the earlier copy, if it did. */
  lastMiss?: string;
}

export interface SnapshotReport {
  perfMap: SnapshotFileState;
  jitDump: SnapshotFileState;
  procMaps: SnapshotFileState;
}

/** The last bytes copied, compared with the source before appending to tell growth from a rewrite. */
const tailBytes = 4096;

interface GrowingCopy {
  state: SnapshotFileState;
  /** A copy given up at its deadline that has not returned yet: no other copy of this file starts meanwhile. */
  abandoned?: Promise<unknown>;
  /** dev:ino of the source copied, and the copy's last bytes. */
  identity?: string;
  sourceSize?: number;
  tail?: Buffer;
}

/** The report of snapshots never taken, each missed for `reason`. */
export function missedSnapshots(target: TargetInfo, options: ProcfsOptions, reason: string): SnapshotReport {
  const state = (file: string, source: string): SnapshotFileState => ({
    file,
    source,
    copies: 0,
    bytes: 0,
    lastMiss: reason,
  });
  return {
    perfMap: state(layout.perfMap(target.nspid), target.perfMap.path),
    jitDump: state(layout.jitDump(target.nspid), target.jitDump.path),
    procMaps: state(layout.procMaps, procPath(target.pid, 'maps', options)),
  };
}

/** Takes and refreshes the snapshots of one target. Owned by one collect session. */
export class TargetSnapshotter {
  private readonly perfMap: GrowingCopy;
  private readonly jitDump: GrowingCopy;
  private readonly procMaps: SnapshotFileState;
  private readonly options: SnapshotOptions;

  constructor(
    private readonly folder: OutputFolder,
    private readonly files: TargetFiles,
    private readonly target: TargetInfo,
    options: Partial<SnapshotOptions> = {},
    private readonly warn: Warn = ignoreWarnings,
  ) {
    this.options = { ...snapshotDefaults, ...options };
    const state = (file: string, source: string): SnapshotFileState => ({ file, source, copies: 0, bytes: 0 });
    this.perfMap = { state: state(layout.perfMap(target.nspid), target.perfMap.path) };
    this.jitDump = { state: state(layout.jitDump(target.nspid), target.jitDump.path) };
    this.procMaps = state(layout.procMaps, procPath(target.pid, 'maps', options));
  }

  /** Refreshes every snapshot whose source changed; never throws for a vanished or hostile target. */
  async refresh(): Promise<void> {
    await Promise.all([this.copyGrowing(this.perfMap), this.copyGrowing(this.jitDump), this.copyProcMaps()]);
  }

  report(): SnapshotReport {
    return structuredClone({ perfMap: this.perfMap.state, jitDump: this.jitDump.state, procMaps: this.procMaps });
  }

  private async copyGrowing(copy: GrowingCopy): Promise<void> {
    const { state } = copy;
    if (copy.abandoned) {
      state.lastMiss = 'an earlier copy that passed its deadline has not returned yet';
      return;
    }
    let handle;
    try {
      handle = await this.files.lookup(state.source, 'file');
    } catch (error) {
      state.lastMiss = missReason(error);
      return;
    }
    try {
      const { dev, ino, size, mtimeMs } = handle.stat;
      const identity = `${dev}:${ino}`;
      if (identity === copy.identity && size === copy.sourceSize && mtimeMs === state.sourceMtimeMs) return;
      if (size < state.bytes) {
        state.lastMiss = `source shrank from ${state.bytes} to ${size} bytes`;
        return;
      }
      const limit = Math.min(size, this.options.maxBytes);
      if (size > this.options.maxBytes && !state.capped) {
        state.capped = true;
        this.warn(
          `${state.source} in the target is ${size} bytes, more than the ${this.options.maxBytes}-byte snapshot ` +
            `limit: only its first ${limit} bytes are kept (raise it with --snapshot-limit)`,
        );
      }
      const limits = { timeoutMs: this.options.copyTimeoutMs, signal: this.options.signal };
      await withDeadline(limits, state.source, async (live) => {
        const source = await openForReading(handle);
        try {
          if (!(await this.append(copy, source, identity, limit, live)))
            await this.copyWhole(copy, source, limit, live);
        } finally {
          await source.close();
        }
      });
      copy.identity = identity;
      copy.sourceSize = size;
      state.sourceMtimeMs = mtimeMs;
      delete state.lastMiss;
    } catch (error) {
      state.lastMiss = missReason(error);
    } finally {
      if (!copy.abandoned) await handle.close();
    }
  }

  /** Appends what the source gained since the last copy; false when it was rewritten (or never copied). */
  private async append(
    copy: GrowingCopy,
    source: FileHandle,
    identity: string,
    limit: number,
    live: () => boolean,
  ): Promise<boolean> {
    const { state, tail } = copy;
    if (copy.identity !== identity || !tail || state.bytes === 0) return false;
    const now = Buffer.alloc(tail.length);
    const { bytesRead } = await source.read(now, 0, tail.length, state.bytes - tail.length);
    if (bytesRead !== tail.length || !now.equals(tail)) return false;
    if (limit > state.bytes) {
      const dest = await this.folder.openExisting(state.file);
      try {
        const { bytes } = await copyRange(source, dest, state.bytes, limit, live);
        if (bytes < limit) await dest.truncate(bytes);
        copy.tail = await lastBytes(dest, bytes);
        state.bytes = bytes;
      } finally {
        await dest.close();
      }
      state.copies++;
    }
    return true;
  }

  private async copyWhole(copy: GrowingCopy, source: FileHandle, limit: number, live: () => boolean): Promise<void> {
    const { state } = copy;
    const partial = `${state.file}.partial`;
    const dest = await this.folder.create(partial, outputModes.privateFile);
    try {
      const { bytes } = await copyRange(source, dest, 0, limit, live);
      // Holes at the end were not written: the length says where the copy ends.
      await dest.truncate(bytes);
      if (bytes < state.bytes) throw new Error(`copy shrank to ${bytes} bytes`);
      copy.tail = await lastBytes(dest, bytes);
      await dest.close();
      await this.folder.rename(partial, state.file);
      state.bytes = bytes;
      state.copies++;
    } catch (error) {
      await dest.close().catch(() => undefined);
      await this.folder.remove(partial);
      throw error;
    }
  }

  // /proc/PID/maps reports size 0, so it is read whole each time (up to its cap); empty means the process is exiting.
  private async copyProcMaps(): Promise<void> {
    const state = this.procMaps;
    const partial = `${state.file}.partial`;
    try {
      const text = await readProcText(this.target.pid, 'maps', this.options);
      if (text === undefined) throw Object.assign(new Error('gone'), { code: 'ENOENT' });
      if (text.length === 0) throw new Error('the process is exiting (empty maps)');
      await this.folder.writeFile(partial, text, outputModes.privateFile);
      await this.folder.rename(partial, state.file);
      state.copies++;
      state.bytes = Buffer.byteLength(text);
      delete state.lastMiss;
    } catch (error) {
      state.lastMiss = missReason(error);
      await this.folder.remove(partial);
    }
  }
}

async function lastBytes(file: FileHandle, end: number): Promise<Buffer> {
  const length = Math.min(tailBytes, end);
  const tail = Buffer.alloc(length);
  await file.read(tail, 0, length, end - length);
  return tail;
}

function missReason(error: unknown): string {
  if (isMissing(error)) return 'not present (or the target is gone)';
  if (error instanceof RootedPathError) return `refused: ${error.reason}`;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT' || code === 'ESRCH') return 'not present (or the target is gone)';
  return error instanceof Error ? error.message : String(error);
}

// The one way profcpu reads a target's files: a PID in; a view of its file system out, through /proc/PID/root, in
// which every path is resolved inside the target's root (src/files/rooted.ts: absolute links re-rooted, `..` kept
// below the root, FIFOs and devices never opened, pseudo file systems refused), every read capped and under a
// deadline (src/files/bounded-read.ts), folders listed up to a count, and sockets handed out as a `/proc/self/fd/N`
// path that reaches exactly the socket inode checked (so connect() cannot be redirected by a link swapped in later).
// Files and sockets whose owner is not the target's user are refused: they are not the target's own.
import { opendir } from 'node:fs/promises';
import { readCapped, withDeadline, type CappedBytes } from '../files/bounded-read.js';
import { isMissing, RootedPathError, RootedTree, type ObjectKind, type PathHandle } from '../files/rooted.js';
import { mountCheckOfFd } from './mounts.js';
import { procPath, type ProcfsOptions } from './procfs.js';

export interface TargetFileLimits {
  /** Bytes read from one file at most. Default 256 MiB. */
  maxBytes: number;
  /** Time allowed for one lookup or read, ms. Default 10 s. */
  timeoutMs: number;
  /** Names listed from one folder at most. Default 100 000. */
  maxEntries: number;
}

export const targetFileDefaults: Readonly<TargetFileLimits> = Object.freeze({
  maxBytes: 256 << 20,
  timeoutMs: 10_000,
  maxEntries: 100_000,
});

export interface TargetFilesOptions extends ProcfsOptions {
  /** The target's effective uid: files and sockets owned by anyone else (root excepted) are refused. */
  uid?: number | undefined;
  limits?: Partial<TargetFileLimits>;
  signal?: AbortSignal | undefined;
  /**
   * refuse (default): nothing on a FUSE or network file system, or on a mount not known to be local, is looked up
   * below the target's root (src/target/mounts.ts), for a process
   * that a lookup held for good could not leave; read: looked up like the rest, for collect's target reader, which
   * is killed instead.
   */
  stallingMounts?: 'refuse' | 'read';
}

/** What a path in the target holds, as `stat` would say, or why it cannot be used. */
export interface TargetFileState {
  present: boolean;
  size?: number;
  mtimeMs?: number;
  uid?: number;
  /** Set when something is there but profcpu refuses it (a FIFO, a link out of reach, another user's file). */
  refused?: string;
}

export class TargetFiles {
  readonly limits: TargetFileLimits;

  private constructor(
    private readonly tree: RootedTree,
    private readonly options: TargetFilesOptions,
  ) {
    this.limits = { ...targetFileDefaults, ...options.limits };
  }

  /** Opens the target's root once: later lookups go through it even if the PID is reused meanwhile. */
  static async open(pid: number, options: TargetFilesOptions = {}): Promise<TargetFiles> {
    const refuse = options.stallingMounts !== 'read';
    const tree = await RootedTree.open(procPath(pid, 'root', options), {
      ...(refuse && { refuseFileSystem: mountCheckOfFd(pid, options) }),
    });
    return new TargetFiles(tree, options);
  }

  async close(): Promise<void> {
    await this.tree.close();
  }

  /** A handle on `path`, which must be a `kind` and belong to the target's user. Throws RootedPathError. */
  async lookup(path: string, kind: ObjectKind): Promise<PathHandle> {
    const handle = await withDeadline(
      this.deadline(),
      path,
      () => this.tree.lookup(path, kind),
      (late) => late.close(),
    );
    const { uid } = this.options;
    if (uid !== undefined && handle.stat.uid !== uid && handle.stat.uid !== 0) {
      await handle.close();
      throw new RootedPathError(path, `owned by uid ${handle.stat.uid}, not by the target's user (uid ${uid})`);
    }
    return handle;
  }

  /** The state of the regular file at `path`, never throwing. */
  async describe(path: string): Promise<TargetFileState> {
    try {
      const handle = await this.lookup(path, 'file');
      await handle.close();
      const { size, mtimeMs, uid } = handle.stat;
      return { present: true, size, mtimeMs, uid };
    } catch (error) {
      if (isMissing(error) || !(error instanceof RootedPathError)) return { present: false };
      return { present: false, refused: error.reason };
    }
  }

  /** The regular file at `path`, up to `maxBytes` (default: the limits'). */
  async read(path: string, maxBytes = this.limits.maxBytes): Promise<CappedBytes> {
    const handle = await this.lookup(path, 'file');
    try {
      return await readCapped(handle, { maxBytes, ...this.deadline() });
    } finally {
      await handle.close();
    }
  }

  /** Names in the folder at `path` (unsorted), at most `maxEntries`; `truncated` when there were more. */
  async list(path: string): Promise<{ names: string[]; truncated: boolean }> {
    const handle = await this.lookup(path, 'directory');
    try {
      return await withDeadline(this.deadline(), path, async (live) => {
        const names: string[] = [];
        // Leaving the loop, by its end or early, closes the folder.
        for await (const entry of await opendir(handle.kernelPath, { bufferSize: 256 })) {
          if (!live()) break;
          if (names.length >= this.limits.maxEntries) return { names, truncated: true };
          names.push(entry.name);
        }
        return { names, truncated: false };
      });
    } finally {
      await handle.close();
    }
  }

  private deadline() {
    return { timeoutMs: this.limits.timeoutMs, signal: this.options.signal };
  }
}

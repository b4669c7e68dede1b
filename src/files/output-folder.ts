// The one way profcpu writes into an output folder, which may be a folder somebody sent (its contents are then
// untrusted) or one a run is filling. Takes the folder's path; gives file creation and renames that never go
// through a link planted in it: the folder is opened once and every name is looked up in it through
// `/proc/self/fd/N/<name>` (openat, in effect), subfolders must be real folders (a link named `flamescope` or
// `target` is refused), and files are created exclusively (O_EXCL, O_NOFOLLOW) after any stale entry of that name is
// unlinked (unlinking a link removes the link, never what it points to). Reads of the folder's files go through the
// same handle with links refused and a size cap (rooted.ts, bounded-read.ts), so a FIFO or a link in a received
// folder can neither hang a run nor make it read outside the folder.
import { constants } from 'node:fs';
import {
  lchown,
  lstat,
  mkdir,
  open,
  opendir,
  realpath,
  rename,
  rmdir,
  statfs,
  unlink,
  type FileHandle,
} from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import { readCapped, type CappedBytes, type ReadLimits } from './bounded-read.js';
import { RootedTree, type ObjectKind, type PathHandle } from './rooted.js';

const O_CLOEXEC = 0o2000000;
const createFlags =
  constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NOCTTY | O_CLOEXEC;
const reopenFlags = constants.O_RDWR | constants.O_NOFOLLOW | constants.O_NOCTTY | constants.O_NONBLOCK | O_CLOEXEC;

/**
 * Creates the file at `path` and opens it for writing, never through a link and never over a file already there
 * (O_EXCL, O_NOFOLLOW): for files profcpu makes outside an output folder too (/tmp, perf's build-id cache).
 */
export function createExclusive(path: string, mode: number): Promise<FileHandle> {
  return open(path, createFlags, mode);
}

/** Modes of what profcpu creates: renders are for sharing, raw data (perf.data, target snapshots) is private. */
export const outputModes = Object.freeze({ file: 0o644, privateFile: 0o600, folder: 0o755, privateFolder: 0o700 });

export class OutputFolder {
  private constructor(
    private readonly tree: RootedTree,
    /** The folder's real path (for messages and for tools given a path, such as perf -o). */
    readonly path: string,
  ) {}

  /** Opens the folder at `path` (the user's own path: links in it are followed once, here), creating it if asked. */
  static async open(path: string, options: { create?: boolean; mode?: number } = {}): Promise<OutputFolder> {
    try {
      if (options.create) await mkdir(path, { recursive: true, mode: options.mode ?? outputModes.folder });
      const real = await realpath(path);
      return new OutputFolder(await RootedTree.open(real, { links: 'refuse' }), real);
    } catch (error) {
      if (error instanceof ProfcpuError) throw error;
      throw ioError(path, error);
    }
  }

  async close(): Promise<void> {
    await this.tree.close();
  }

  /** `/proc/self/fd/N/<name>`: `name` looked up in this very folder, whatever its path now leads to. */
  private at(name: string): string {
    if (name === '' || name === '.' || name === '..' || name.includes('/'))
      throw new RangeError(`${JSON.stringify(name)} is not one path component`);
    return `${this.tree.rootHandle.kernelPath}/${name}`;
  }

  /** A subfolder (`a` or `a/b`), which must be a real folder; created (with `mode`) when `create` is set. */
  async folder(relative: string, options: { create?: boolean; mode?: number } = {}): Promise<OutputFolder> {
    const [first, ...rest] = relative.split('/').filter((part) => part !== '');
    if (first === undefined) throw new RangeError('empty folder name');
    if (options.create) {
      await mkdir(this.at(first), { mode: options.mode ?? outputModes.folder }).catch((error: unknown) => {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw ioError(`${this.path}/${first}`, error);
      });
    }
    let child: OutputFolder;
    try {
      const tree = await RootedTree.open(this.at(first), { links: 'refuse', noFollow: true });
      child = new OutputFolder(tree, `${this.path}/${first}`);
    } catch (error) {
      throw new ProfcpuError('IO', `${this.path}/${first} is not a folder profcpu may write in`, {
        remedy: `It must be a real folder (not a link, a file or anything else): remove or rename it.`,
        cause: error,
      });
    }
    if (rest.length === 0) return child;
    try {
      return await child.folder(rest.join('/'), options);
    } finally {
      await child.close();
    }
  }

  /** Runs `work` with the folder holding `relative` (a name, or `sub/name`) and the last component. */
  async within<T>(
    relative: string,
    options: { create?: boolean; folderMode?: number },
    work: (folder: OutputFolder, name: string) => Promise<T>,
  ): Promise<T> {
    const parts = relative.split('/').filter((part) => part !== '');
    const name = parts.pop();
    if (name === undefined) throw new RangeError('empty file name');
    if (parts.length === 0) return work(this, name);
    const folder = await this.folder(parts.join('/'), {
      create: options.create ?? false,
      ...(options.folderMode !== undefined && { mode: options.folderMode }),
    });
    try {
      return await work(folder, name);
    } finally {
      await folder.close();
    }
  }

  /**
   * Creates `relative` afresh and opens it for writing: whatever had that name (a stale file, a planted link) is
   * unlinked first, and the new file is created exclusively, never through a link.
   */
  async create(relative: string, mode: number = outputModes.file): Promise<FileHandle> {
    return this.within(relative, { create: true, folderMode: folderModeFor(mode) }, async (folder, name) => {
      const path = folder.at(name);
      await removeNonFolder(path, `${folder.path}/${name}`);
      try {
        return await createExclusive(path, mode);
      } catch (error) {
        throw ioError(`${folder.path}/${name}`, error);
      }
    });
  }

  /**
   * Creates `relative` exclusively, removing nothing: undefined when something already carries the name (a name
   * another process claimed stays theirs, as a lock file).
   */
  async createNew(relative: string, mode: number = outputModes.file): Promise<FileHandle | undefined> {
    return this.within(relative, { create: true, folderMode: folderModeFor(mode) }, async (folder, name) => {
      try {
        return await createExclusive(folder.at(name), mode);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EEXIST') return undefined;
        throw ioError(`${folder.path}/${name}`, error);
      }
    });
  }

  /** Opens the existing regular file `relative` for reading and writing (to append to it), never through a link. */
  async openExisting(relative: string): Promise<FileHandle> {
    return this.within(relative, {}, async (folder, name) => {
      const file = await open(folder.at(name), reopenFlags).catch((error: unknown) => {
        throw ioError(`${folder.path}/${name}`, error);
      });
      if (!(await file.stat()).isFile()) {
        await file.close();
        throw new ProfcpuError('IO', `${folder.path}/${name} is not a regular file`);
      }
      return file;
    });
  }

  /** Writes `data` to `relative` through create(). */
  async writeFile(relative: string, data: string | Uint8Array, mode: number = outputModes.file): Promise<void> {
    const file = await this.create(relative, mode);
    try {
      await file.writeFile(data);
    } finally {
      await file.close();
    }
  }

  /** Renames `from` to `to` (both relative to this folder); a link at `to` is replaced, never followed. */
  async rename(from: string, to: string): Promise<void> {
    await this.within(from, {}, (fromFolder, fromName) =>
      this.within(to, {}, async (toFolder, toName) => {
        try {
          await rename(fromFolder.at(fromName), toFolder.at(toName));
        } catch (error) {
          throw ioError(`${toFolder.path}/${toName}`, error);
        }
      }),
    );
  }

  /** Removes the file (or link) `relative`; nothing there is fine. Never removes a folder. */
  async remove(relative: string): Promise<void> {
    await this.within(relative, {}, (folder, name) => removeNonFolder(folder.at(name), `${folder.path}/${name}`)).catch(
      (error: unknown) => {
        // The folder holding it is not there (or not a real folder): nothing of ours to remove.
        if (!(error instanceof ProfcpuError)) throw error;
      },
    );
  }

  /** Removes the empty subfolder `relative`; a folder still holding files stays. Never throws. */
  async removeEmptyFolder(relative: string): Promise<void> {
    await this.within(relative, {}, (folder, name) => rmdir(folder.at(name))).catch(() => undefined);
  }

  /** What `relative` is, without following a link (undefined when there is nothing). */
  async lstat(relative: string) {
    return this.within(relative, {}, (folder, name) => lstat(folder.at(name))).catch(() => undefined);
  }

  /** A handle on `relative`, which must be a `kind` reached without any link. */
  lookup(relative: string, kind: ObjectKind): Promise<PathHandle> {
    return this.tree.lookup(relative, kind);
  }

  /** Names in the subfolder `relative` (reached without links), at most `maxEntries`; none when it is not there. */
  async list(relative: string, maxEntries = 10_000): Promise<string[]> {
    const handle = await this.lookup(relative, 'directory').catch(() => undefined);
    if (!handle) return [];
    try {
      const names: string[] = [];
      for await (const entry of await opendir(handle.kernelPath, { bufferSize: 256 })) {
        if (names.length >= maxEntries) break;
        names.push(entry.name);
      }
      return names;
    } finally {
      await handle.close();
    }
  }

  /**
   * Gives the folder and everything in it to `uid:gid` (the user who asked for the profile, when profcpu runs as
   * root for them). Links are changed themselves, never followed; folders are entered only when real folders.
   */
  async chownTree(owner: { uid: number; gid: number }, limits = { maxEntries: 10_000, maxDepth: 8 }): Promise<void> {
    // Each folder is held open while its entries are changed by name inside it: a folder swapped for a link
    // meanwhile is not entered (the lookup refuses links), and lchown never follows one. A folder past the limits
    // (not one collect wrote) is given up on.
    let entries = 0;
    const walk = async (relative: string, depth: number): Promise<void> => {
      if (depth > limits.maxDepth) return;
      const folder = await this.lookup(relative || '.', 'directory').catch(() => undefined);
      if (!folder) return;
      try {
        for await (const entry of await opendir(folder.kernelPath)) {
          if (++entries > limits.maxEntries) return;
          await lchown(`${folder.kernelPath}/${entry.name}`, owner.uid, owner.gid);
          if (entry.isDirectory()) await walk(relative ? `${relative}/${entry.name}` : entry.name, depth + 1);
        }
      } finally {
        await folder.close();
      }
    };
    await lchown(this.path, owner.uid, owner.gid);
    await walk('', 0);
  }

  /** Bytes an unprivileged writer may still put on the folder's file system (statfs f_bavail). */
  async freeBytes(): Promise<number> {
    const fs = await statfs(this.tree.rootHandle.kernelPath);
    return fs.bavail * fs.bsize;
  }

  /** The regular file `relative`, reached without links, read up to the cap. */
  async read(relative: string, limits: ReadLimits): Promise<CappedBytes> {
    const handle = await this.lookup(relative, 'file');
    try {
      return await readCapped(handle, limits);
    } finally {
      await handle.close();
    }
  }
}

function folderModeFor(fileMode: number): number {
  return (fileMode & 0o077) === 0 ? outputModes.privateFolder : outputModes.folder;
}

async function removeNonFolder(path: string, shown: string): Promise<void> {
  const stat = await lstat(path).catch(() => undefined);
  if (!stat) return;
  if (stat.isDirectory())
    throw new ProfcpuError('IO', `${shown} is a folder where profcpu writes a file`, { remedy: 'Remove it.' });
  await unlink(path).catch((error: unknown) => {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  });
}

function ioError(path: string, error: unknown): ProfcpuError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return new ProfcpuError('IO', `cannot write ${path}: ${code ?? (error as Error)?.message ?? String(error)}`, {
    remedy: 'Check that the output folder is writable, a real folder, and that its disk has room.',
    cause: error,
  });
}

// Opening a path *inside* a directory tree that somebody else controls: a target's root (`/proc/PID/root`) or a
// received output folder. Takes the tree's root and a path in it; gives a handle on the object the path names, found
// the way the kernel's openat2(RESOLVE_IN_ROOT) would find it (Node has no openat2): every component is looked up
// in the directory held open before it, through `/proc/self/fd/N/<name>`, never by a joined path string. So:
// - an absolute symlink starts again at the tree's root, not at ours (`/tmp/perf-1.map -> /etc/shadow` is the
//   target's /etc/shadow); `..` never climbs above the root; a relative link is followed from where it sits;
//   procfs magic links (`/proc/self/root`, `/proc/N/fd/3`) are read as text and re-rooted, never jumped through;
// - a component swapped for a link between two steps changes nothing: what was opened stays opened (O_PATH fds);
// - nothing is opened for reading until its type is known, so a FIFO or a device is never opened at all (opening
//   a FIFO blocks; opening a device can act on it), and files on pseudo file systems (procfs, sysfs...) are refused:
//   a link to `/proc/<pid>/environ` would otherwise show another process's secrets.
// With `links: 'refuse'` (received folders) any symbolic link is an error instead.
import { constants, type Stats } from 'node:fs';
import { open, readlink, statfs, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';

/** O_PATH (Linux, the same value on x86-64 and AArch64): an fd that names an inode without opening it for I/O. */
const O_PATH = 0o10000000;
const O_CLOEXEC = 0o2000000;

export type LinkPolicy = 'in-root' | 'refuse';
export type ObjectKind = 'file' | 'directory' | 'socket';

export interface RootedOptions {
  /** in-root: symlinks are followed inside the root; refuse: a symlink anywhere in the path is an error. */
  links: LinkPolicy;
  /** Symlinks followed in one lookup at most (the kernel's own limit is 40). */
  maxLinks: number;
  /**
   * Says why nothing may be looked up through a freshly opened O_PATH fd (on a FUSE or network file system, whose
   * server may never answer, or on one that cannot be checked: src/target/mounts.ts), checked before the fd is even
   * stat'ed; undefined lets it be. `parent` is the fd of the folder it was opened in, undefined for the tree's root.
   * A check that throws refuses. Default: none refused.
   */
  refuseFileSystem?: (fd: number, parent: number | undefined) => Promise<string | undefined>;
}

export const rootedDefaults: Readonly<RootedOptions> = Object.freeze({ links: 'in-root', maxLinks: 40 });

/** f_type values (linux/magic.h) of file systems whose "files" are windows onto the kernel or other processes. */
const pseudoFileSystems = new Map<number, string>([
  [0x9fa0, 'procfs'],
  [0x62656572, 'sysfs'],
  [0x64626720, 'debugfs'],
  [0x74726163, 'tracefs'],
  [0x73636673, 'securityfs'],
  [0x27e0eb, 'cgroup'],
  [0x63677270, 'cgroup2'],
  [0xcafe4a11, 'bpffs'],
  [0x62656570, 'configfs'],
  [0xde5e81e4, 'efivarfs'],
  [0x6165676c, 'pstore'],
  [0xf97cff8c, 'selinuxfs'],
  [0x43415d53, 'smackfs'],
  [0x65735543, 'fusectl'],
  [0x6e736673, 'nsfs'],
]);

/** Why a path could not be opened; `reason` is short and safe to show (`a FIFO, not a regular file`). */
export class RootedPathError extends ProfcpuError {
  constructor(
    readonly path: string,
    readonly reason: string,
    readonly errno?: string,
  ) {
    super('BAD_INPUT', `${path}: ${reason}`);
  }
}

/** True when the error means "nothing there" (as opposed to "something there we refuse"). */
export function isMissing(error: unknown): boolean {
  return error instanceof RootedPathError && (error.errno === 'ENOENT' || error.errno === 'ESRCH');
}

/** An O_PATH handle on one object found under a root. Close it when done. */
export class PathHandle {
  private closed = false;
  constructor(
    private readonly handle: FileHandle,
    readonly stat: Stats,
    /** The path asked for, as the root sees it (for messages). */
    readonly path: string,
  ) {}

  get fd(): number {
    return this.handle.fd;
  }

  /** A path the kernel resolves to exactly this object (for open, connect, statfs), valid while it is open. */
  get kernelPath(): string {
    return `/proc/self/fd/${this.handle.fd}`;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.handle.close().catch(() => undefined);
  }
}

/** A directory tree opened once; every lookup under it stays inside it. Close it when done. */
export class RootedTree {
  private constructor(
    private readonly root: PathHandle,
    private readonly options: RootedOptions,
  ) {}

  /**
   * Opens the tree at `rootPath`, which may itself be a link (`/proc/PID/root`) unless `noFollow` is set (a subfolder
   * of a tree, whose own name a stranger may have made a link).
   */
  static async open(
    rootPath: string,
    options: Partial<RootedOptions> & { noFollow?: boolean } = {},
  ): Promise<RootedTree> {
    let handle: FileHandle;
    try {
      handle = await openPath(rootPath, O_PATH | constants.O_DIRECTORY | (options.noFollow ? constants.O_NOFOLLOW : 0));
    } catch (error) {
      throw new RootedPathError(rootPath, describeErrno(error), errnoOf(error));
    }
    const all = { ...rootedDefaults, ...options };
    await refuseOrKeep(handle, undefined, rootPath, all);
    return new RootedTree(new PathHandle(handle, await statOrClose(handle), '/'), all);
  }

  /** The root's own handle (not to be closed by callers). */
  get rootHandle(): PathHandle {
    return this.root;
  }

  async close(): Promise<void> {
    await this.root.close();
  }

  /**
   * Finds `path` (absolute or relative to the root, both meaning the same) and checks it is a `kind`. Throws
   * RootedPathError: missing (errno ENOENT), a link where links are refused, a loop, or the wrong kind of object.
   */
  async lookup(path: string, kind: ObjectKind): Promise<PathHandle> {
    const handle = await this.walk(path);
    try {
      await checkKind(handle, kind);
      return handle;
    } catch (error) {
      await handle.close();
      throw error;
    }
  }

  private async walk(path: string): Promise<PathHandle> {
    const rootFd = this.root.fd;
    // Directories held open on the way down; `..` pops one, never the root.
    const stack: PathHandle[] = [];
    const top = () => stack.at(-1)?.fd ?? rootFd;
    const pending = components(path);
    let links = 0;
    const release = async () => {
      for (const handle of stack.splice(0)) await handle.close();
    };
    try {
      if (pending.length === 0) return await this.reopen(rootFd, path);
      while (pending.length > 0) {
        const name = pending.shift()!;
        if (name === '..') {
          await stack.pop()?.close();
          continue;
        }
        const here = `/proc/self/fd/${top()}/${name}`;
        let file: FileHandle;
        try {
          file = await openPath(here, O_PATH | constants.O_NOFOLLOW);
        } catch (error) {
          throw new RootedPathError(path, describeErrno(error), errnoOf(error));
        }
        await refuseOrKeep(file, top(), path, this.options);
        const stat = await statOrClose(file);
        if (stat.isSymbolicLink()) {
          await file.close();
          if (this.options.links === 'refuse') throw new RootedPathError(path, 'a symbolic link (refused here)');
          if (++links > this.options.maxLinks)
            throw new RootedPathError(path, `more than ${this.options.maxLinks} symbolic links`, 'ELOOP');
          const target = await readlink(here).catch((error: unknown) => {
            throw new RootedPathError(path, describeErrno(error), errnoOf(error));
          });
          if (target.startsWith('/')) await release();
          pending.unshift(...components(target));
          continue;
        }
        const handle = new PathHandle(file, stat, path);
        if (pending.length === 0) return handle;
        if (!stat.isDirectory()) {
          await handle.close();
          throw new RootedPathError(path, `${name} is not a directory`, 'ENOTDIR');
        }
        stack.push(handle);
      }
      // Only `..` components were left: the directory reached is the answer.
      const last = stack.pop();
      return last ?? (await this.reopen(rootFd, path));
    } finally {
      await release();
    }
  }

  private async reopen(fd: number, path: string): Promise<PathHandle> {
    const again = await openPath(`/proc/self/fd/${fd}`, O_PATH | constants.O_DIRECTORY);
    return new PathHandle(again, await statOrClose(again), path);
  }
}

/** Closes a fresh handle and throws when it lies on a file system the options refuse (or the check fails). */
async function refuseOrKeep(
  handle: FileHandle,
  parent: number | undefined,
  path: string,
  options: RootedOptions,
): Promise<void> {
  const refused = await options
    .refuseFileSystem?.(handle.fd, parent)
    .catch((error: unknown) => `on a file system that cannot be checked (${describeErrno(error)}; refused)`);
  if (refused === undefined) return;
  await handle.close().catch(() => undefined);
  throw new RootedPathError(path, refused);
}

/** fstat of a fresh handle, closing it when even that fails (so no fd is left behind). */
async function statOrClose(handle: FileHandle): Promise<Stats> {
  try {
    return await handle.stat();
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

function components(path: string): string[] {
  return path.split('/').filter((part) => part !== '' && part !== '.');
}

async function checkKind(handle: PathHandle, kind: ObjectKind): Promise<void> {
  const { stat, path } = handle;
  const actual = kindOf(stat);
  const wanted = kind === 'file' ? 'a regular file' : kind === 'directory' ? 'a directory' : 'a socket';
  if (actual !== wanted) throw new RootedPathError(path, `${actual}, not ${wanted}`);
  if (kind === 'file') {
    const pseudo = await pseudoFileSystemOf(handle.kernelPath);
    if (pseudo)
      throw new RootedPathError(path, `a file on ${pseudo} (refused: it shows the kernel or other processes)`);
  }
}

/** The name of the pseudo file system (procfs, sysfs...) holding `kernelPath`, or undefined for a real one. */
export async function pseudoFileSystemOf(kernelPath: string): Promise<string | undefined> {
  return pseudoFileSystems.get((await statfs(kernelPath)).type);
}

export function kindOf(stat: Stats): string {
  if (stat.isFile()) return 'a regular file';
  if (stat.isDirectory()) return 'a directory';
  if (stat.isSocket()) return 'a socket';
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  if (stat.isSymbolicLink()) return 'a symbolic link';
  return 'an unknown kind of file';
}

/** open(2) with raw flags (O_PATH is not in fs.constants), close-on-exec so perf and other children never inherit. */
function openPath(path: string, flags: number): Promise<FileHandle> {
  return open(path, flags | O_CLOEXEC);
}

function errnoOf(error: unknown): string | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

function describeErrno(error: unknown): string {
  switch (errnoOf(error)) {
    case 'ENOENT':
      return 'not present';
    case 'ELOOP':
      return 'a symbolic link loop';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOTDIR':
      return 'a path component is not a directory';
    case 'ESRCH':
      return 'the process is gone';
    default:
      return error instanceof Error ? error.message : String(error);
  }
}

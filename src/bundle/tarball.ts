// An output folder to a reproducible `.tar.gz`: takes the folder, gives an archive whose bytes depend only on the
// files' names and contents. Entries are relative (top folder = the output folder's basename), sorted, with fixed
// modes (0644 files, 0755 folders), one fixed mtime, no owner names or ids, and a portable gzip header. Symbolic
// links and special files are left out (a link could point outside the folder) and reported.
import { lstat, readdir, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { create } from 'tar';

export interface TarballOptions {
  /** The one mtime every entry gets. Default: the Unix epoch. */
  mtime: Date;
  /** Paths relative to the folder (as in layout.ts) to leave out, besides the archive itself. Default none. */
  exclude: readonly string[];
}

export const defaultTarballOptions: Readonly<TarballOptions> = Object.freeze({
  mtime: new Date(0),
  exclude: Object.freeze([]),
});

export interface TarballResult {
  /** The archive written. */
  path: string;
  /** Entry names in archive order, e.g. `15-02-11_2026-11-22/perf.data`; folders end in `/`. */
  entries: string[];
  /** Paths (relative to the folder) that were not regular files or folders, left out. */
  skipped: string[];
}

/**
 * Archives `dir` into `output`, which may lie inside `dir` (it is never archived into itself). Writes to a temporary
 * name first so a failure never leaves a half-written archive under the final name.
 */
export async function writeTarball(
  dir: string,
  output: string,
  options: Partial<TarballOptions> = {},
): Promise<TarballResult> {
  const { mtime, exclude } = { ...defaultTarballOptions, ...options };
  const partial = `${output}.partial`;
  const skip = new Set([...exclude, relativeTo(dir, output), relativeTo(dir, partial)]);
  const listing = await listFolder(dir, skip);
  const top = basename(dir);
  const entries = [top, ...listing.entries.map((entry) => `${top}/${entry}`)];
  const isDir = [true, ...listing.isDir];
  try {
    await create(
      {
        file: partial,
        cwd: dirname(dir),
        gzip: true,
        portable: true,
        noDirRecurse: true,
        mtime,
        // `portable` only applies a 022 umask; the archive should not carry this machine's modes at all.
        onWriteEntry: (entry) => {
          if (entry.stat) entry.stat.mode = (entry.stat.mode & ~0o7777) | (entry.type === 'Directory' ? 0o755 : 0o644);
        },
      },
      entries,
    );
    await rename(partial, output);
  } catch (error) {
    await rm(partial, { force: true });
    throw error;
  }
  return { path: output, entries: entries.map((e, i) => (isDir[i] ? `${e}/` : e)), skipped: listing.skipped };
}

function relativeTo(dir: string, path: string): string {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  return path.startsWith(prefix) ? path.slice(prefix.length) : path;
}

export interface FolderListing {
  /** Paths relative to the folder, `/`-separated, each folder before its contents, names in byte order. */
  entries: string[];
  /** Whether each entry is a folder (same index). */
  isDir: boolean[];
  /** Symbolic links and special files, left out. */
  skipped: string[];
}

/** Folders and regular files under `dir`, except the relative paths in `skip` (and what is under them). */
export async function listFolder(dir: string, skip: ReadonlySet<string> = new Set()): Promise<FolderListing> {
  const listing: FolderListing = { entries: [], isDir: [], skipped: [] };
  const walk = async (relative: string): Promise<void> => {
    const names = (await readdir(relative ? join(dir, relative) : dir)).sort(compareBytes);
    for (const name of names) {
      const path = relative ? `${relative}/${name}` : name;
      if (skip.has(path)) continue;
      const stat = await lstat(join(dir, path));
      if (stat.isDirectory()) {
        listing.entries.push(path);
        listing.isDir.push(true);
        await walk(path);
      } else if (stat.isFile()) {
        listing.entries.push(path);
        listing.isDir.push(false);
      } else {
        listing.skipped.push(path);
      }
    }
  };
  await walk('');
  return listing;
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

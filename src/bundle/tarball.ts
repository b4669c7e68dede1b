// An output folder to a reproducible `.tar.gz`: takes the folder, gives an archive whose bytes depend only on the
// files' names and contents. Entries are relative (top folder = the output folder's basename), sorted, with fixed
// modes (0644 files, 0755 folders; 0600 and 0700 for the raw data, which may hold the target's secrets), one fixed
// mtime, no owner names or ids, and a portable gzip header. Symbolic links and special files are left out (a link
// could point outside the folder) and reported. The archive is written through OutputFolder (no planted link is
// written through) and is itself private, as it holds the raw data.
import { lstat, readdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import { create } from 'tar';
import { ProfcpuError } from '../error.js';
import { outputModes, type OutputFolder } from '../files/output-folder.js';
import { layout } from './layout.js';

export interface TarballOptions {
  /** The one mtime every entry gets. Default: the Unix epoch. */
  mtime: Date;
  /** Paths relative to the folder (as in layout.ts) to leave out, besides the archive itself. Default none. */
  exclude: readonly string[];
  /** Paths relative to the folder whose entries (and everything under them) are private. Default: the raw data. */
  private: readonly string[];
}

export const defaultTarballOptions: Readonly<TarballOptions> = Object.freeze({
  mtime: new Date(0),
  exclude: Object.freeze([]),
  private: Object.freeze([layout.perfData, layout.targetDir]),
});

export interface TarballResult {
  /** The archive written. */
  path: string;
  /** Entry names in archive order, e.g. `15-02-11_2026-11-22/perf.data`; folders end in `/`. */
  entries: string[];
  /** Paths (relative to the folder) that were not regular files or folders, left out. */
  skipped: string[];
}

/** Where the archive goes: a name in an output folder (which may be `dir` itself: it is never archived into itself). */
export interface TarballDestination {
  folder: OutputFolder;
  name: string;
}

/**
 * Archives `dir` into `into`. Writes to a temporary name first so a failure never leaves a half-written archive under
 * the final name.
 */
export async function writeTarball(
  dir: string,
  into: TarballDestination,
  options: Partial<TarballOptions> = {},
): Promise<TarballResult> {
  const { mtime, exclude, private: privatePaths } = { ...defaultTarballOptions, ...options };
  const partial = `${into.name}.partial`;
  const skip = new Set(exclude);
  if (into.folder.path === dir) for (const name of [into.name, partial]) skip.add(name);
  const listing = await listFolder(dir, skip);
  const top = basename(dir);
  const entries = [top, ...listing.entries.map((entry) => `${top}/${entry}`)];
  const isDir = [true, ...listing.isDir];
  const isPrivate = (entryPath: string) => {
    const relative = entryPath.slice(top.length + 1).replace(/\/$/, '');
    return privatePaths.some((p) => relative === p || relative.startsWith(`${p}/`));
  };
  const file = await into.folder.create(partial, outputModes.privateFile);
  try {
    const archive = create(
      {
        cwd: dirname(dir),
        gzip: true,
        portable: true,
        noDirRecurse: true,
        mtime,
        // `portable` only applies a 022 umask; the archive should not carry this machine's modes at all.
        onWriteEntry: (entry) => {
          if (!entry.stat) return;
          const folder = entry.type === 'Directory';
          const mode = isPrivate(entry.path)
            ? folder
              ? outputModes.privateFolder
              : outputModes.privateFile
            : folder
              ? outputModes.folder
              : outputModes.file;
          entry.stat.mode = (entry.stat.mode & ~0o7777) | mode;
        },
      },
      entries,
    );
    await pipeline(archive, file.createWriteStream());
    await into.folder.rename(partial, into.name);
  } catch (error) {
    await file.close().catch(() => undefined);
    await into.folder.remove(partial);
    throw error;
  }
  return {
    path: `${into.folder.path}/${into.name}`,
    entries: entries.map((e, i) => (isDir[i] ? `${e}/` : e)),
    skipped: listing.skipped,
  };
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
/**
 * Entries and folder depth an output folder may have. collect writes a dozen files two deep; a folder somebody sent
 * with more is refused rather than walked for ever.
 */
export const folderLimits = Object.freeze({ maxEntries: 10_000, maxDepth: 8 });

export async function listFolder(dir: string, skip: ReadonlySet<string> = new Set()): Promise<FolderListing> {
  const listing: FolderListing = { entries: [], isDir: [], skipped: [] };
  const tooBig = (what: string) =>
    new ProfcpuError('BAD_INPUT', `${dir} holds ${what}: not an output folder profcpu wrote`, {
      remedy: 'Point profcpu at the folder collect wrote, or move what else is in it elsewhere.',
    });
  const walk = async (relative: string, depth: number): Promise<void> => {
    if (depth > folderLimits.maxDepth) throw tooBig(`folders more than ${folderLimits.maxDepth} deep`);
    const names = (await readdir(relative ? join(dir, relative) : dir)).sort(compareBytes);
    for (const name of names) {
      const path = relative ? `${relative}/${name}` : name;
      if (skip.has(path)) continue;
      if (listing.entries.length + listing.skipped.length >= folderLimits.maxEntries)
        throw tooBig(`more than ${folderLimits.maxEntries} entries`);
      const stat = await lstat(join(dir, path));
      if (stat.isDirectory()) {
        listing.entries.push(path);
        listing.isDir.push(true);
        await walk(path, depth + 1);
      } else if (stat.isFile()) {
        listing.entries.push(path);
        listing.isDir.push(false);
      } else {
        listing.skipped.push(path);
      }
    }
  };
  await walk('', 0);
  return listing;
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

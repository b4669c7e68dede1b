// An output folder to a reproducible `.tar.gz`: takes the folder, gives an archive whose bytes depend only on the
// files' names and contents and the order they were added in. Entries are relative (top folder = the output folder's
// basename): those started with first (postprocess: the raw data, compressed while the outputs are made), then files
// added one by one as they are made, then the rest of the folder; each group sorted. Fixed modes (0644 files, 0755
// folders; 0600 and 0700 for the raw data, which may hold the target's secrets), one fixed mtime, no owner names or ids,
// and a portable gzip header. Symbolic links and special files are left out (a link could point outside the folder)
// and reported. The archive is written through OutputFolder (no planted link is written through) and is itself
// private, as it holds the raw data. The tar stream is made here (ustar headers from node-tar's Header) and compressed
// by node's zlib on libuv's thread pool, off the main thread.
import { constants } from 'node:fs';
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import { Header, Pax } from 'tar';
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
  return (await startTarball(dir, into, [], options)).finish();
}

/** An archive being written: what it holds so far streams in while the caller works on the rest of the folder. */
export interface TarballWriter {
  /**
   * Adds the file `relative` now (after its folders, if not added yet), its bytes read from `source`, the name it has
   * until the caller renames it (its `.partial` name): it is opened at once, so the rename may come before it is read.
   * The file must not change any more.
   */
  addFile(relative: string, source: string): Promise<void>;
  /** Adds every entry of the folder not added yet (sorted, as listFolder gives them), then renames the archive. */
  finish(): Promise<TarballResult>;
  /** Stops writing and removes the partial archive, unless finish() succeeded. Never throws. */
  abandon(): Promise<void>;
}

/**
 * Starts archiving `dir` into `into` with the entries under `first` (relative paths, e.g. the raw data, which must not
 * change from then on) right after the top folder; the rest of the folder follows when finish() is called. The tar is
 * compressed by node's zlib stream, whose work runs on libuv's thread pool, so the main thread is free meanwhile.
 */
export async function startTarball(
  dir: string,
  into: TarballDestination,
  first: readonly string[],
  options: Partial<TarballOptions> = {},
): Promise<TarballWriter> {
  const { mtime, exclude, private: privatePaths } = { ...defaultTarballOptions, ...options };
  const partial = `${into.name}.partial`;
  const skip = new Set(exclude);
  if (into.folder.path === dir) for (const name of [into.name, partial]) skip.add(name);
  const top = basename(dir);
  const under = (relative: string, paths: readonly string[]) =>
    paths.some((p) => relative === p || relative.startsWith(`${p}/`));
  const early = await listFolder(dir, skip);
  const added = new Set<string>();
  const entries: string[] = [];
  const queue = new EntryQueue();
  const stop = new AbortController();
  const entry = (relative: string, source: ArchivedEntry['source']) => {
    added.add(relative);
    const path = relative ? `${top}/${relative}` : top;
    const isPrivate = relative !== '' && under(relative, privatePaths);
    const folder = source === 'folder';
    const mode = isPrivate
      ? folder
        ? outputModes.privateFolder
        : outputModes.privateFile
      : folder
        ? outputModes.folder
        : outputModes.file;
    entries.push(folder ? `${path}/` : path);
    queue.push({ path: folder ? `${path}/` : path, mode, mtime, source });
  };
  const add = (listing: FolderListing, wanted: (relative: string) => boolean) =>
    listing.entries.forEach((relative, i) => {
      if (!added.has(relative) && wanted(relative))
        entry(relative, listing.isDir[i] ? 'folder' : { file: join(dir, relative) });
    });
  const file = await into.folder.create(partial, outputModes.privateFile);
  // Output chunks of 1 MiB: each is one job on the thread pool and one turn of the main thread's loop, which the
  // engine keeps busy meanwhile (zlib's default 16 KiB made the compression wait on it).
  const gzip = createGzip({ chunkSize: 1 << 20 });
  const writing = pipeline(
    Readable.from(tarBlocks(queue, stop.signal)),
    gzip,
    portableGzipHeader(),
    file.createWriteStream(),
  );
  writing.catch(() => {});
  entry('', 'folder');
  add(early, (relative) => under(relative, first));
  let state: 'writing' | 'done' | 'abandoned' = 'writing';
  const addFile = async (relative: string, source: string) => {
    const parts = relative.split('/');
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/');
      if (!added.has(parent)) entry(parent, 'folder');
    }
    const handle = await open(join(dir, source), readFlags);
    entry(relative, { handle });
  };
  const abandon = async () => {
    if (state !== 'writing') return;
    state = 'abandoned';
    stop.abort();
    queue.close();
    // Node's streams end the pipeline whatever the generator is waiting for.
    gzip.destroy(new Error('tarball abandoned'));
    await writing.catch(() => undefined);
    await queue.closeHandles();
    await file.close().catch(() => undefined);
    await into.folder.remove(partial).catch(() => undefined);
  };
  return {
    addFile,
    abandon,
    async finish() {
      let skipped: string[];
      try {
        const rest = await listFolder(dir, skip);
        skipped = rest.skipped;
        add(rest, () => true);
        queue.close();
        await writing;
        await into.folder.rename(partial, into.name);
        state = 'done';
      } catch (error) {
        await abandon();
        throw error;
      }
      return { path: `${into.folder.path}/${into.name}`, entries, skipped };
    },
  };
}

/** An entry to archive: a folder, a file to open when its turn comes, or a file opened already. */
interface ArchivedEntry {
  path: string;
  mode: number;
  mtime: Date;
  source: 'folder' | { file: string } | { handle: FileHandle };
}

/** Entries in archive order, handed to the one reader (tarBlocks) as they come. */
class EntryQueue {
  private readonly entries: ArchivedEntry[] = [];
  private wake: (() => void) | undefined;
  private closed = false;

  push(entry: ArchivedEntry): void {
    this.entries.push(entry);
    this.wake?.();
  }

  /** No entry comes after those queued. */
  close(): void {
    this.closed = true;
    this.wake?.();
  }

  /** The next entry; undefined once closed and empty. */
  async next(): Promise<ArchivedEntry | undefined> {
    while (this.entries.length === 0 && !this.closed) await new Promise<void>((resolve) => (this.wake = resolve));
    this.wake = undefined;
    return this.entries.shift();
  }

  /** Closes the files opened for entries never read. */
  async closeHandles(): Promise<void> {
    for (const entry of this.entries.splice(0))
      if (typeof entry.source === 'object' && 'handle' in entry.source)
        await entry.source.handle.close().catch(() => undefined);
  }
}

const BLOCK = 512;

/**
 * How an archived file is opened: never through a link, and without blocking (a FIFO put where a file was listed
 * opens at once, then is refused as not a regular file, rather than holding a thread for ever).
 */
const readFlags = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/**
 * The tar stream of the queue's entries: a ustar header each (a pax header before it when a name does not fit), a
 * file's bytes padded to whole blocks, two empty blocks at the end. A file is read in 1 MiB chunks, each after the last
 * was taken, and exactly the size it had when its header was made: one that shrank meanwhile is an error.
 */
async function* tarBlocks(queue: EntryQueue, signal: AbortSignal): AsyncGenerator<Buffer> {
  for (let entry = await queue.next(); entry; entry = await queue.next()) {
    signal.throwIfAborted();
    const { source } = entry;
    if (source === 'folder') {
      yield headerBlocks(entry, 'Directory', 0);
      continue;
    }
    const handle = 'handle' in source ? source.handle : await open(source.file, readFlags);
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new ProfcpuError('IO', `${entry.path} is no longer a regular file`);
      yield headerBlocks(entry, 'File', stat.size);
      for (let at = 0; at < stat.size;) {
        signal.throwIfAborted();
        const chunk = Buffer.allocUnsafe(Math.min(1 << 20, stat.size - at));
        const { bytesRead } = await handle.read(chunk, 0, chunk.length, at);
        if (bytesRead === 0) throw new ProfcpuError('IO', `${entry.path} shrank while it was archived`);
        at += bytesRead;
        yield chunk.subarray(0, bytesRead);
      }
      const padding = (BLOCK - (stat.size % BLOCK)) % BLOCK;
      if (padding > 0) yield Buffer.alloc(padding);
    } finally {
      await handle.close();
    }
  }
  yield Buffer.alloc(2 * BLOCK);
}

function headerBlocks(entry: ArchivedEntry, type: 'File' | 'Directory', size: number): Buffer {
  // Folders carry no time, as node-tar's portable archives had it.
  const fields = { path: entry.path, mode: entry.mode, size, type, mtime: type === 'File' ? entry.mtime : undefined };
  const header = new Header(fields);
  const block = Buffer.alloc(BLOCK);
  header.encode(block);
  if (!header.needPax) return block;
  return Buffer.concat([new Pax(fields).encode(), block]);
}

/**
 * zlib writes the gzip header's OS byte as this system's (3, Unix); 255 (unknown) makes the archive's bytes the same
 * wherever it is built, as node-tar's own `portable` gzip did.
 */
function portableGzipHeader(): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      if (seen <= 9 && seen + chunk.length > 9) chunk[9 - seen] = 255;
      seen += chunk.length;
      done(null, chunk);
    },
  });
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

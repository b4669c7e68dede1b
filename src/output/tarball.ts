// An output folder to a reproducible `.tar.gz`: takes the folder, gives an archive whose bytes depend only on the
// files' names and contents and the order they were added in. Entries are relative (top folder = the output folder's
// basename): those started with first (postprocess: the raw data, compressed while the outputs are made), then files
// added one by one as they are made, then the rest of the folder; each group sorted. Fixed modes (0644 files, 0755
// folders; 0600 and 0700 for the raw data, which may hold the target's secrets), one fixed mtime, no owner names or ids,
// and a portable gzip header. Symbolic links and special files are left out (a link could point outside the folder)
// and reported. The archive is written through OutputFolder (no planted link is written through) and is itself
// private, as it holds the raw data. The tar stream is made here (ustar headers from node-tar's Header) and compressed
// by node's zlib on libuv's thread pool, off the main thread. A file given as it is made (streamFile: the FlameScope
// text, the bulk of the archive) is compressed meanwhile into a gzip member of its own, kept in a private file of no
// name until its entry's turn: the archive is then several gzip members one after the other, which gzip, GNU tar,
// node's zlib and Python's tarfile (not its stream mode) read as one stream (RFC 1952, 2.2).
import { constants } from 'node:fs';
import { lstat, open, readdir, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { once } from 'node:events';
import type { TransformOptions, Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { createGzip, type Gzip, type ZlibOptions } from 'node:zlib';
import { Header } from 'tar/header';
import { Pax } from 'tar/pax';
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
  /**
   * Adds the file `relative` whose bytes the caller gives as it makes them (StreamedFile): they are compressed as they
   * come; the entry takes its place in the archive when the caller ends it, after what was added before.
   */
  streamFile(relative: string): Promise<StreamedFile>;
  /** Adds every entry of the folder not added yet (sorted, as listFolder gives them), then renames the archive. */
  finish(): Promise<TarballResult>;
  /** Stops writing and removes the partial archive, unless finish() succeeded. Never throws. */
  abandon(): Promise<void>;
}

/** A file's bytes given to the archive as they are made (TarballWriter.streamFile). */
export interface StreamedFile {
  /** The next bytes; `done` is called once they are compressed, when the caller may reuse `bytes`. */
  write(bytes: Buffer, done: (error?: Error | null) => void): void;
  /** Resolves once few enough bytes wait to be compressed to give more (undefined when that is so now). */
  room(): Promise<void> | undefined;
  /** No more bytes: the entry is queued now, and this resolves once every `done` has been called. */
  end(): Promise<void>;
}

/** Bytes waiting to be compressed, per gzip stream, before the writer waits: a few of the 1 MiB chunks. */
const gzipBacklog = 4 << 20;
/**
 * The compression level of every member: zlib's fast levels (1-3) take a third to a half of the time of its default
 * (6), for a somewhat larger archive. Measured at 100k samples: the FlameScope text, 143 MB, in 0.13 s to 5.1 MB at
 * level 3 against 0.28 s to 2.7 MB at 6; perf.data, 23 MB, in 31 ms to 1.34 MB against 84 ms to 1.12 MB. The raw data
 * and the FlameScope text are compressed while the engine works, on the core it leaves, which the default level
 * overran; the other outputs as they are made. The raw data at level 3 rather than 6 (the text was already at 3):
 * postprocess with prof.tar.gz took 0.99 s against 1.05 s at 100k samples, and about 5.7 s against 6.0 s at 1M; the
 * archive is 6.5 MB against 6.3 MB at 100k samples, 64 MB against 61 MB at 1M.
 */
const gzipLevel = 3;

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
  const early = await listFolder(dir, skip);
  const file = await into.folder.create(partial, outputModes.privateFile);
  const archive = new Archive(dir, into, partial, skip, { mtime, privatePaths }, file);
  archive.addTop(early, first);
  return archive;
}

/** Whether `relative` is one of `paths` or under one of them. */
function isUnder(relative: string, paths: readonly string[]): boolean {
  return paths.some((p) => relative === p || relative.startsWith(`${p}/`));
}

/** The archive startTarball started: its entries queued as they come, written to `partial` meanwhile. */
class Archive implements TarballWriter {
  private readonly top: string;
  private readonly added = new Set<string>();
  private readonly entries: string[] = [];
  private readonly queue = new EntryQueue();
  private readonly stop = new AbortController();
  /** The gzip streams under way (the archive's current member, streamed files' members): abandon() stops them. */
  private readonly compressing = new Set<Gzip>();
  /** The files holding streamed files' members (unnamed), closed at the end. */
  private readonly members = new Set<FileHandle>();
  /** Streamed files not ended yet: finish() refuses to leave one out. */
  private unended = 0;
  private readonly writing: Promise<void>;
  private state: 'writing' | 'done' | 'abandoned' = 'writing';

  constructor(
    private readonly dir: string,
    private readonly into: TarballDestination,
    private readonly partial: string,
    private readonly skip: ReadonlySet<string>,
    private readonly settings: { mtime: Date; privatePaths: readonly string[] },
    private readonly file: FileHandle,
  ) {
    this.top = basename(dir);
    const { queue, stop, compressing } = this;
    this.writing = writeMembers(tarBlocks(queue, stop.signal), file.createWriteStream(), compressing, stop.signal);
    this.writing.catch(() => {});
  }

  /** The top folder, then the entries of `early` under `first`. */
  addTop(early: FolderListing, first: readonly string[]): void {
    this.entry('', 'folder');
    this.add(early, (relative) => isUnder(relative, first));
  }

  async addFile(relative: string, source: string): Promise<void> {
    this.parentsOf(relative);
    const handle = await open(join(this.dir, source), readFlags);
    this.entry(relative, { handle });
  }

  async streamFile(relative: string): Promise<StreamedFile> {
    if (this.state !== 'writing') throw new Error('the archive is no longer being written');
    const { handle, name } = await this.memberFile();
    if (this.state !== 'writing') {
      // Finished or abandoned meanwhile: its files are closed already, but for this one.
      this.members.delete(handle);
      await handle.close();
      throw new Error('the archive is no longer being written');
    }
    return this.streamInto(relative, handle, name);
  }

  async finish(): Promise<TarballResult> {
    let skipped: string[];
    try {
      if (this.unended > 0) throw new Error('a streamed file of the archive was never ended');
      const rest = await listFolder(this.dir, this.skip);
      skipped = rest.skipped;
      this.add(rest, () => true);
      this.queue.close();
      await this.writing;
      await this.into.folder.rename(this.partial, this.into.name);
      this.state = 'done';
      await this.closeMembers();
    } catch (error) {
      await this.abandon();
      throw error;
    }
    return { path: `${this.into.folder.path}/${this.into.name}`, entries: this.entries, skipped };
  }

  async abandon(): Promise<void> {
    if (this.state !== 'writing') return;
    this.state = 'abandoned';
    this.stop.abort();
    this.queue.close();
    // Node's streams end the pipelines whatever the generator is waiting for.
    for (const gzip of this.compressing) gzip.destroy(new Error('tarball abandoned'));
    await this.writing.catch(() => undefined);
    await this.queue.closeHandles();
    await this.file.close().catch(() => undefined);
    await this.into.folder.remove(this.partial).catch(() => undefined);
    await this.closeMembers();
  }

  private async closeMembers(): Promise<void> {
    for (const handle of this.members) await handle.close().catch(() => undefined);
    this.members.clear();
  }

  /** Queues the entry `relative` ('' for the top folder), private or not as the options say. */
  private entry(relative: string, source: ArchivedEntry['source']): void {
    this.added.add(relative);
    const path = relative ? `${this.top}/${relative}` : this.top;
    const isPrivate = relative !== '' && isUnder(relative, this.settings.privatePaths);
    const folder = source === 'folder';
    const mode = isPrivate
      ? folder
        ? outputModes.privateFolder
        : outputModes.privateFile
      : folder
        ? outputModes.folder
        : outputModes.file;
    this.entries.push(folder ? `${path}/` : path);
    this.queue.push({ path: folder ? `${path}/` : path, mode, mtime: this.settings.mtime, source });
  }

  /** Queues the entries of `listing` not added yet that are `wanted`. */
  private add(listing: FolderListing, wanted: (relative: string) => boolean): void {
    listing.entries.forEach((relative, i) => {
      if (!this.added.has(relative) && wanted(relative))
        this.entry(relative, listing.isDir[i] ? 'folder' : { file: join(this.dir, relative) });
    });
  }

  /** Queues the folders above `relative` not added yet. */
  private parentsOf(relative: string): void {
    const parts = relative.split('/');
    for (let i = 1; i < parts.length; i++) {
      const parent = parts.slice(0, i).join('/');
      if (!this.added.has(parent)) this.entry(parent, 'folder');
    }
  }

  /** The file a streamed file's member is written to, and the name it had. */
  private async memberFile(): Promise<{ handle: FileHandle; name: string }> {
    // A file of its own with no name once opened (nothing can swap it, and a killed run leaves nothing behind):
    // written and read back through the one handle.
    const name = `${this.partial}.${this.members.size}`;
    const handle = await this.into.folder.create(name, outputModes.privateFile);
    this.members.add(handle);
    await this.into.folder.remove(name);
    return { handle, name };
  }

  /** The streamed file `relative`, its bytes compressed into `handle` as they come, queued when it ends. */
  private streamInto(relative: string, handle: FileHandle, name: string): StreamedFile {
    const gzip = archiveGzip();
    this.compressing.add(gzip);
    let size = 0;
    let ended = false;
    this.unended++;
    const member = (async (): Promise<CompressedMember> => {
      let at = 0;
      await drainMember(gzip, async (chunk) => {
        const { bytesWritten } = await handle.write(chunk, 0, chunk.length, at);
        if (bytesWritten !== chunk.length) throw new ProfcpuError('IO', `${name}: a short write`);
        at += chunk.length;
      });
      return { handle, size, compressedSize: at };
    })();
    member.catch(() => {});
    const { signal } = this.stop;
    return {
      write(bytes, done) {
        if (ended) throw new Error(`${relative} was ended: no more bytes can be archived`);
        size += bytes.length;
        gzip.write(bytes, done);
      },
      room() {
        // A member that failed (its file cannot be written) ends the wait, and every wait after it, with its error.
        if (gzip.destroyed) return member.then(() => undefined);
        if (!gzip.writableNeedDrain) return undefined;
        return Promise.race([once(gzip, 'drain', { signal }), member]).then(() => undefined);
      },
      end: async () => {
        if (ended) return;
        ended = true;
        this.unended--;
        gzip.end();
        this.parentsOf(relative);
        this.entry(relative, { member });
        await finished(gzip, { readable: false });
      },
    };
  }
}

/** An entry to archive: a folder, a file to open when its turn comes, or a file opened already. */
interface ArchivedEntry {
  path: string;
  mode: number;
  mtime: Date;
  source: 'folder' | { file: string } | { handle: FileHandle } | { member: Promise<CompressedMember> };
}

/** A streamed file's bytes as a gzip member of their own, in a file, and their size before and after compression. */
interface CompressedMember {
  handle: FileHandle;
  size: number;
  compressedSize: number;
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
async function* tarBlocks(queue: EntryQueue, signal: AbortSignal): AsyncGenerator<Buffer | CompressedMember> {
  for (let entry = await queue.next(); entry; entry = await queue.next()) {
    signal.throwIfAborted();
    const { source } = entry;
    if (source === 'folder') {
      yield headerBlocks(entry, 'Directory', 0);
      continue;
    }
    if ('member' in source) {
      // The member's file is the writer's to close.
      const member = await source.member;
      yield headerBlocks(entry, 'File', member.size);
      yield member;
      const padding = (BLOCK - (member.size % BLOCK)) % BLOCK;
      if (padding > 0) yield Buffer.alloc(padding);
      continue;
    }
    const handle = 'handle' in source ? source.handle : await open(source.file, readFlags);
    try {
      const stat = await handle.stat();
      if (!stat.isFile()) throw new ProfcpuError('IO', `${entry.path} is no longer a regular file`);
      yield headerBlocks(entry, 'File', stat.size);
      yield* chunksOf(handle, stat.size, signal, `${entry.path} shrank while it was archived`);
      const padding = (BLOCK - (stat.size % BLOCK)) % BLOCK;
      if (padding > 0) yield Buffer.alloc(padding);
    } finally {
      await handle.close();
    }
  }
  yield Buffer.alloc(2 * BLOCK);
}

/**
 * Writes the tar stream `blocks` into `out` compressed: its bytes into gzip members made here, a compressed member given
 * (a streamed file's) copied as it is between them. The gzip streams under way are in `compressing`. The streams are
 * driven by hand (write, drain) rather than piped, as one destination takes several sources in turn.
 */
async function writeMembers(
  blocks: AsyncIterable<Buffer | CompressedMember>,
  out: Writable,
  compressing: Set<Gzip>,
  signal: AbortSignal,
): Promise<void> {
  let failed: Error | undefined;
  const onError = (error: Error) => void (failed ??= error);
  out.on('error', onError);
  const put = async (chunk: Buffer) => {
    if (failed) throw failed;
    if (!out.write(chunk)) await once(out, 'drain', { signal });
  };
  let gzip: Gzip | undefined;
  let draining: Promise<void> = Promise.resolve();
  const startMember = (stream: Gzip) => {
    compressing.add(stream);
    draining = drainMember(stream, put);
    draining.catch(() => {});
    return stream;
  };
  const endMember = async () => {
    if (!gzip) return;
    gzip.end();
    await draining;
    compressing.delete(gzip);
    gzip = undefined;
  };
  try {
    for await (const block of blocks) {
      signal.throwIfAborted();
      if (Buffer.isBuffer(block)) {
        gzip ??= startMember(archiveGzip());
        // The member's output failing (the archive cannot be written) ends the wait too.
        if (!gzip.write(block)) await Promise.race([once(gzip, 'drain', { signal }), draining]);
      } else {
        await endMember();
        await copyMember(block, put, signal);
      }
    }
    await endMember();
    if (failed) throw failed;
    out.end();
    await finished(out);
  } catch (error) {
    // onError stays: writes under way end later with errors of their own, which must not go unheard.
    gzip?.destroy();
    out.destroy();
    throw error;
  }
}

/** Each chunk `gzip` makes, its header made portable (portableHeader), into `sink`, until the member ends. */
async function drainMember(gzip: Gzip, sink: (chunk: Buffer) => Promise<void>): Promise<void> {
  const header = portableHeader();
  for await (const chunk of gzip as AsyncIterable<Buffer>) await sink(header(chunk));
}

/** A streamed file's compressed member, the bytes written and no more, read in 1 MiB chunks into `put`. */
async function copyMember(member: CompressedMember, put: (chunk: Buffer) => Promise<void>, signal: AbortSignal) {
  const shrank = 'a compressed member of the archive shrank while it was copied';
  for await (const chunk of chunksOf(member.handle, member.compressedSize, signal, shrank)) await put(chunk);
}

/**
 * The first `size` bytes of `handle`, read from its start in 1 MiB chunks, each read after the last was taken; an
 * error saying `shrank` when the file ends before them.
 */
async function* chunksOf(handle: FileHandle, size: number, signal: AbortSignal, shrank: string) {
  for (let at = 0; at < size;) {
    signal.throwIfAborted();
    const chunk = Buffer.allocUnsafe(Math.min(1 << 20, size - at));
    const { bytesRead } = await handle.read(chunk, 0, chunk.length, at);
    if (bytesRead === 0) throw new ProfcpuError('IO', shrank);
    at += bytesRead;
    yield chunk.subarray(0, bytesRead);
  }
}

/**
 * A gzip stream for the archive, at gzipLevel. Output chunks of 1 MiB: each is one job on the thread pool and one turn of the main
 * thread's loop, which the engine keeps busy meanwhile (zlib's default 16 KiB made the compression wait on it).
 */
function archiveGzip(): Gzip {
  // The options go to the Transform too (ZlibOptions does not name them).
  const options: ZlibOptions & TransformOptions = {
    chunkSize: 1 << 20,
    writableHighWaterMark: gzipBacklog,
    level: gzipLevel,
  };
  return createGzip(options);
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
 * wherever it is built, as node-tar's own `portable` gzip did. Given a member's chunks in order, sets that byte.
 */
function portableHeader(): (chunk: Buffer) => Buffer {
  let seen = 0;
  return (chunk) => {
    if (seen <= 9 && seen + chunk.length > 9) chunk[9 - seen] = 255;
    seen += chunk.length;
    return chunk;
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

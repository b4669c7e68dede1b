// A prof.tar.gz somebody sent, unpacked into a new folder: takes the archive (untrusted input), gives a folder holding
// only regular files and folders named as in an output folder (src/output/layout.ts), or an error saying what it
// refused. The archive is read through gunzip and node-tar's Parser (strict: a damaged header is an error), and every
// entry is written by profcpu itself through OutputFolder (files created exclusively, never through a link).
//
// Refused: links of either kind, devices, FIFOs and every other special entry, absolute paths, `..`, more than one top
// folder, a name given twice, an archive that is not a regular file (a FIFO or a device would never end). Capped:
// entries and depth (as an output folder: folderLimits), bytes declared (and the disk's free space, checked before
// each entry is written, so a bomb stops at its header), bytes decompressed after the archive's end, and time.
// Entries that are not part of an output folder are left out and reported. Everything is written into a hidden
// `.profcpu-unpack-XXXXXX` folder beside the destination and renamed at the end: a failure, the deadline or Ctrl-C
// removes it, so no half folder is left.
import { constants } from 'node:fs';
import { lstat, mkdtemp, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';
import { pipeline, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { Parser } from 'tar/parse';
import type { ReadEntry } from 'tar/read-entry';
import type { Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import { layout } from './layout.js';
import { defaultUnpackLimits, type UnpackLimits } from './unpack-limits.js';

export { defaultUnpackLimits, type UnpackLimits } from './unpack-limits.js';

export interface UnpackOptions {
  /** The folder to create (it must not exist). Default: the archive's top folder name, next to the archive. */
  into?: string;
  limits?: Partial<UnpackLimits>;
  signal?: AbortSignal;
  warn?: Warn;
}

export interface UnpackResult {
  /** The folder created, absolute. */
  dir: string;
  files: number;
  bytes: number;
  /** Entries left out because an output folder holds no such name (paths inside the top folder). */
  skipped: string[];
}

/** Room kept free on the disk for the outputs postprocess writes next. */
const diskReserve = 256 * 1024 ** 2;
/** Bytes after the archive's end (its zero blocks, gzip padding): tar pads to 10 KiB records; more is not a tarball. */
const maxTrailingBytes = 1024 ** 2;
/** The declared sizes of entries left out (names no output folder has), together: profcpu never writes them. */
const maxLeftOutBytes = 16 * 1024 ** 2;
/** A pax header longer than this is no name an output folder has. */
const maxMetaEntrySize = 64 * 1024;
/** The first names of an output folder: every layout path's first component (the archive itself is rebuilt). */
const knownNames = new Set(
  (Object.values(layout) as unknown[])
    .filter((value): value is string => typeof value === 'string' && value !== layout.tarball)
    .map((value) => value.split('/')[0]!),
);

export async function unpackTarball(archive: string, options: UnpackOptions = {}): Promise<UnpackResult> {
  const limits = { ...defaultUnpackLimits, ...options.limits };
  const path = resolve(archive);
  const into = options.into === undefined ? undefined : resolve(options.into);
  if (into !== undefined) await refuseExisting(into);
  const input = await openArchive(path);
  let partial: string;
  try {
    partial = await mkdtemp(join(into === undefined ? dirname(path) : dirname(into), '.profcpu-unpack-'));
  } catch (error) {
    await input.close();
    throw new ProfcpuError('IO', `cannot create a folder next to ${into ?? path}: ${(error as Error).message}`, {
      remedy: 'Unpack it somewhere writable: --out DIR.',
      cause: error,
    });
  }
  // A timer that holds the event loop (AbortSignal.timeout's does not): a wait that nothing else would end, ends here.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error('deadline passed')), limits.deadlineMs);
  const signals = [deadline.signal, ...(options.signal ? [options.signal] : [])];
  try {
    const folder = await OutputFolder.open(partial);
    let unpacked: Omit<UnpackResult, 'dir'> & { top: string };
    try {
      const budget = Math.min(limits.maxBytes, (await folder.freeBytes()) - diskReserve);
      const writer = new EntryWriter(path, folder, { ...limits, budget });
      unpacked = await readArchive(path, input, writer, AbortSignal.any(signals)).catch((error: unknown) => {
        throw explain(error, path, { deadline: deadline.signal, signal: options.signal, limits });
      });
    } finally {
      await folder.close();
    }
    const dir = into ?? join(dirname(path), unpacked.top);
    await refuseExisting(dir);
    await rename(partial, dir);
    if (unpacked.skipped.length > 0)
      options.warn?.(
        `${basename(path)}: left out ${unpacked.skipped.length} entries an output folder does not hold ` +
          `(${unpacked.skipped.slice(0, 5).join(', ')}${unpacked.skipped.length > 5 ? ', ...' : ''})`,
      );
    return { dir, files: unpacked.files, bytes: unpacked.bytes, skipped: unpacked.skipped };
  } catch (error) {
    await rm(partial, { recursive: true, force: true });
    throw error;
  } finally {
    clearTimeout(timer);
    await input.close().catch(() => undefined);
  }
}

/** Opens the archive without blocking (a FIFO opens at once) and makes sure it is a regular file. */
async function openArchive(path: string): Promise<FileHandle> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY).catch(
    (error: NodeJS.ErrnoException) => {
      throw new ProfcpuError(error.code === 'ENOENT' ? 'NO_PERF_DATA' : 'IO', `cannot open ${path}: ${error.code}`, {
        remedy: 'Pass a prof.tar.gz written by profcpu, or the folder holding perf.data.',
        cause: error,
      });
    },
  );
  const stat = await handle.stat().catch(async (error: unknown) => {
    await handle.close();
    throw new ProfcpuError('IO', `cannot read ${path}: ${(error as Error).message}`, { cause: error });
  });
  if (!stat.isFile()) {
    await handle.close();
    const device = stat.isCharacterDevice() || stat.isBlockDevice();
    const what = stat.isFIFO() ? 'a FIFO' : device ? 'a device' : 'a socket or other special file';
    throw new ProfcpuError('BAD_INPUT', `${path} is ${what}, not a regular file: it is not read`, {
      remedy: 'Save the archive as a file first, then pass that file.',
    });
  }
  // A gzip stream, or a tar whose first header says `ustar`: anything else is refused before a folder is made for it.
  const head = Buffer.alloc(263);
  const { bytesRead } = await handle.read(head, 0, head.length, 0);
  const gzip = bytesRead >= 2 && head[0] === 0x1f && head[1] === 0x8b;
  const tar = bytesRead >= 262 && head.toString('latin1', 257, 262) === 'ustar';
  if (!gzip && !tar) {
    await handle.close();
    throw badArchive(path, 'it is neither gzip nor tar');
  }
  return handle;
}

async function refuseExisting(dir: string): Promise<void> {
  if (await lstat(dir).catch(() => undefined))
    throw new ProfcpuError('BAD_INPUT', `${dir} already exists: the archive is unpacked into a new folder only`, {
      remedy: `Post-process that folder (\`profcpu postprocess --dir ${dir}\`), or unpack elsewhere with --out DIR.`,
    });
}

/** Streams the archive (gunzipped when it is gzip) into node-tar's parser and the writer; settles once all is written. */
async function readArchive(
  path: string,
  input: FileHandle,
  writer: EntryWriter,
  signal: AbortSignal,
): Promise<Omit<UnpackResult, 'dir'> & { top: string }> {
  const magic = Buffer.alloc(2);
  await input.read(magic, 0, 2, 0);
  const raw = input.createReadStream({ start: 0, autoClose: false });
  const source: Readable =
    magic[0] === 0x1f && magic[1] === 0x8b ? pipeline(raw, createGunzip(), () => undefined) : raw;
  const parser = new Parser({ strict: true, brotli: false, zstd: false, maxMetaEntrySize });
  // The first failure (a refused entry, a parser or gzip error, the signal) stops the reading and every wait.
  let failure: unknown;
  const halt = new AbortController();
  const fail = (error: unknown) => {
    failure ??= error;
    halt.abort();
    source.destroy();
    writer.abort();
  };
  parser.on('error', fail);
  parser.on('entry', (entry: ReadEntry) => writer.take(entry).catch(fail));
  // A pax or long-name header past maxMetaEntrySize, which node-tar would skip over, byte by byte: refused at once.
  parser.on('ignoredEntry', (entry: ReadEntry) =>
    fail(badArchive(path, `it holds a ${entry.type} header of ${entry.size} bytes (at most ${maxMetaEntrySize})`)),
  );
  let ended = false;
  parser.on('eof', () => (ended = true));
  const onAbort = () => fail(signal.reason);
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    signal.throwIfAborted();
    let trailing = 0;
    let total = 0;
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (failure !== undefined) break;
      total += chunk.length;
      if (total > writer.maxArchiveBytes)
        throw badArchive(path, `it unpacks to more than ${writer.maxArchiveBytes} bytes of tar`);
      if (ended) {
        trailing += chunk.length;
        if (trailing > maxTrailingBytes)
          throw badArchive(path, `more than ${maxTrailingBytes} bytes follow the archive's end`);
        continue;
      }
      if (!parser.write(chunk)) await drained(parser, halt.signal);
    }
    if (failure === undefined) {
      const done = new Promise<void>((resolveEnd) => parser.once('end', resolveEnd));
      parser.end();
      const halted = new Promise<void>((resolveHalt) => halt.signal.addEventListener('abort', () => resolveHalt()));
      await Promise.race([done, halted]);
    }
    await writer.settled();
  } catch (error) {
    fail(error);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
  await writer.settled().catch(() => undefined);
  if (failure !== undefined) throw failure;
  return writer.result();
}

/** Waits for the parser to take more (its current entry written), or the signal. */
function drained(parser: Parser, signal: AbortSignal): Promise<void> {
  return new Promise((resolveDrain) => {
    const done = () => {
      parser.off('drain', done);
      signal.removeEventListener('abort', done);
      resolveDrain();
    };
    parser.once('drain', done);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Checks each entry and writes it into the folder, one after the other. */
class EntryWriter {
  private entries = 0;
  private files = 0;
  private bytes = 0;
  private leftOutBytes = 0;
  private top: string | undefined;
  private readonly seen = new Set<string>();
  private readonly skipped: string[] = [];
  private chain: Promise<void> = Promise.resolve();
  /** Fails the copy of the entry being written, whose data stops coming when the reading stops. */
  private stopCurrent: ((error: Error) => void) | undefined;
  private aborted = false;

  constructor(
    private readonly archive: string,
    private readonly folder: OutputFolder,
    private readonly limits: UnpackLimits & { budget: number },
  ) {}

  /** Entries arrive one at a time (the parser waits for each to be read): each is checked, then written or drained. */
  take(entry: ReadEntry): Promise<void> {
    let relative: string | undefined;
    try {
      relative = this.check(entry);
    } catch (error) {
      entry.resume();
      return Promise.reject(error);
    }
    if (relative === undefined) {
      entry.resume();
      return Promise.resolve();
    }
    const write = this.chain.then(() => this.write(entry, relative));
    this.chain = write.catch(() => undefined);
    return write;
  }

  /**
   * The most bytes of tar the entries allowed can take: their contents, a header and a pax header each, and the end.
   * Every cap is checked at each header; this one bounds whatever they miss.
   */
  get maxArchiveBytes(): number {
    return (
      this.limits.budget +
      maxLeftOutBytes +
      (this.limits.maxEntries + 1) * (2 * 512 + maxMetaEntrySize) +
      maxTrailingBytes
    );
  }

  /** Stops the entry being written (its read fails) and any to come. */
  abort(): void {
    this.aborted = true;
    this.stopCurrent?.(new Error('unpacking stopped'));
  }

  async settled(): Promise<void> {
    await this.chain;
  }

  result() {
    if (this.top === undefined) throw badArchive(this.archive, 'it holds no folder');
    if (!this.seen.has(layout.perfData))
      throw badArchive(this.archive, `its folder ${this.top}/ holds no ${layout.perfData}`);
    return { top: this.top, files: this.files, bytes: this.bytes, skipped: this.skipped };
  }

  /** The path inside the top folder to write ('' for the top folder itself), undefined to leave out; throws to refuse. */
  private check(entry: ReadEntry): string | undefined {
    if (++this.entries > this.limits.maxEntries)
      throw badArchive(this.archive, `it holds more than ${this.limits.maxEntries} entries`);
    const name = entry.path;
    const refuse = (why: string) => badArchive(this.archive, `${JSON.stringify(name.slice(0, 200))} ${why}`);
    if (name.startsWith('/')) throw refuse('is an absolute path');
    const parts = name.replace(/\/$/, '').split('/');
    if (parts.includes('..')) throw refuse('climbs out with ..');
    if (parts.some((part) => part === '' || part === '.')) throw refuse('has an empty or . component');
    if (/[\u0000-\u001f\u007f\\]/.test(name)) throw refuse('holds a control character or a backslash');
    if (parts.some((part) => Buffer.byteLength(part) > 255)) throw refuse('has a name longer than 255 bytes');
    const kind = kindOf(entry.type);
    if (kind === undefined) throw refuse(`is ${describeType(entry.type)}: only files and folders are unpacked`);
    const [top, ...inside] = parts as [string, ...string[]];
    this.top ??= top;
    if (top !== this.top) throw refuse(`is outside the archive's one top folder ${this.top}/`);
    if (inside.length === 0) {
      if (kind !== 'folder') throw refuse('is a file where the top folder should be');
      return this.firstTime('', refuse);
    }
    if (inside.length > this.limits.maxDepth + 1)
      throw refuse(`is more than ${this.limits.maxDepth} folders deep: not an output folder profcpu wrote`);
    const relative = inside.join('/');
    if (!knownNames.has(inside[0]!)) {
      // Drained rather than written, but gunzipped all the same: their sizes are checked at the header too.
      this.leftOutBytes += entry.size;
      if (this.leftOutBytes > maxLeftOutBytes)
        throw refuse(
          `takes the entries left out (names no output folder has) past ${maxLeftOutBytes} bytes: ` +
            'not unpacked (a decompression bomb, or not a recording)',
        );
      if (this.skipped.length < this.limits.maxEntries) this.skipped.push(relative);
      return undefined;
    }
    if (kind === 'file') {
      this.bytes += entry.size;
      if (this.bytes > this.limits.budget) {
        const space = this.limits.budget < this.limits.maxBytes;
        throw new ProfcpuError(
          space ? 'NO_SPACE' : 'BAD_INPUT',
          `${this.archive}: ${JSON.stringify(name.slice(0, 200))} would take the files unpacked past ` +
            (space
              ? `the disk's free space (${this.limits.budget} bytes, keeping ${diskReserve} free): not unpacked`
              : `${this.limits.maxBytes} bytes: not unpacked (a decompression bomb, or not a recording)`),
          { remedy: space ? 'Unpack it on a disk with more room: --out DIR.' : 'Ask for the recording again.' },
        );
      }
    }
    return this.firstTime(relative, refuse);
  }

  private firstTime(relative: string, refuse: (why: string) => ProfcpuError): string {
    if (this.seen.has(relative)) throw refuse('is in the archive twice');
    this.seen.add(relative);
    return relative;
  }

  private async write(entry: ReadEntry, relative: string): Promise<void> {
    if (this.aborted) throw new Error('unpacking stopped');
    if (kindOf(entry.type) === 'folder') {
      if (relative !== '')
        await (await this.folder.folder(relative, { create: true, mode: outputModes.privateFolder })).close();
      entry.resume();
      return;
    }
    const file = await this.folder.create(relative, outputModes.privateFile);
    // Events rather than for-await: a Minipass iterator waits for ever on an entry whose data stopped coming.
    let written = 0;
    let writing = Promise.resolve();
    try {
      await new Promise<void>((resolveCopy, rejectCopy) => {
        this.stopCurrent = rejectCopy;
        if (this.aborted) rejectCopy(new Error('unpacking stopped'));
        entry.on('data', (chunk: Buffer) => {
          entry.pause();
          writing = file.write(chunk).then(() => {
            written += chunk.length;
            entry.resume();
          });
          writing.catch(rejectCopy);
        });
        entry.on('end', () => writing.then(() => resolveCopy(), rejectCopy));
        entry.on('error', rejectCopy);
      });
      if (written !== entry.size) throw badArchive(this.archive, `${entry.path} is cut short`);
      if (entry.mtime && Number.isFinite(entry.mtime.getTime())) await file.utimes(entry.mtime, entry.mtime);
      this.files++;
    } finally {
      this.stopCurrent = undefined;
      await writing.catch(() => undefined);
      await file.close();
    }
  }
}

function kindOf(type: ReadEntry['type']): 'file' | 'folder' | undefined {
  if (type === 'File' || type === 'OldFile' || type === 'ContiguousFile') return 'file';
  if (type === 'Directory') return 'folder';
  return undefined;
}

function describeType(type: ReadEntry['type']): string {
  switch (type) {
    case 'SymbolicLink':
      return 'a symbolic link';
    case 'Link':
      return 'a hard link';
    case 'CharacterDevice':
    case 'BlockDevice':
      return 'a device node';
    case 'FIFO':
      return 'a FIFO';
    default:
      return `an entry of type ${type}`;
  }
}

function badArchive(archive: string, why: string): ProfcpuError {
  return new ProfcpuError('BAD_INPUT', `${archive} is refused: ${why}`, {
    remedy: 'Pass a prof.tar.gz written by profcpu (nothing is unpacked from this one), or ask for it again.',
  });
}

/** The deadline, Ctrl-C, gzip's and node-tar's own errors, each as a ProfcpuError saying what happened. */
function explain(
  error: unknown,
  archive: string,
  context: { deadline: AbortSignal; signal: AbortSignal | undefined; limits: UnpackLimits },
): unknown {
  if (isProfcpuError(error)) return error;
  if (context.signal?.aborted)
    return new ProfcpuError('ABORTED', `unpacking ${archive} was aborted: nothing of it was kept`, { cause: error });
  if (context.deadline.aborted)
    return new ProfcpuError(
      'BAD_INPUT',
      `unpacking ${archive} took longer than ${context.limits.deadlineMs / 1000} s: stopped, nothing of it was kept`,
      { remedy: 'Check the disk it is unpacked on is not full or very slow.', cause: error },
    );
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'Z_BUF_ERROR' || code === 'Z_DATA_ERROR' || code?.startsWith('ERR_ZLIB'))
    return badArchive(archive, `its gzip stream is truncated or damaged (${(error as Error).message})`);
  if (typeof code === 'string' && code.startsWith('TAR_'))
    return badArchive(archive, `it is not a whole tar archive (${(error as Error).message})`);
  if (typeof code === 'string' && /^E[A-Z]+$/.test(code))
    return new ProfcpuError('IO', `cannot unpack ${archive}: ${(error as Error).message}`, {
      remedy: 'Check the folder it is unpacked into is writable and has room, or choose another with --out DIR.',
      cause: error,
    });
  return error;
}

// Reading files that somebody else controls, within limits: a byte cap and a deadline on every read, and copies that
// keep holes as holes. Takes a PathHandle from rooted.ts (already known to be a regular file) or a trusted path (a
// procfs file of ours), gives bytes, or a copy, and says whether the cap cut it. A read the kernel never finishes
// (a hung network or FUSE file system) rejects at the deadline; its thread is given up, not waited for.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import type { PathHandle } from './rooted.js';

export interface ReadLimits {
  /** Bytes read at most; what lies beyond is left unread and `truncated` says so. */
  maxBytes: number;
  /** Time allowed for the whole read, in ms. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

export const readLimitDefaults = Object.freeze({ timeoutMs: 10_000 });

export interface CappedBytes {
  bytes: Buffer;
  /** True when the file holds more than `maxBytes`. */
  truncated: boolean;
}

const chunkBytes = 1 << 20;
const O_CLOEXEC = 0o2000000;
const readFlags = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY | O_CLOEXEC;

/** Opens the regular file behind `handle` for reading; the reopened file is checked to be the same inode. */
export async function openForReading(handle: PathHandle): Promise<FileHandle> {
  const file = await open(handle.kernelPath, readFlags);
  const now = await file.stat();
  if (now.ino !== handle.stat.ino || now.dev !== handle.stat.dev || !now.isFile()) {
    await file.close();
    throw new ProfcpuError('BAD_INPUT', `${handle.path}: changed while it was opened`);
  }
  return file;
}

/** The whole file behind `handle`, up to `maxBytes`, within the deadline (readSized: a regular file's size is known). */
export async function readCapped(handle: PathHandle, limits: ReadLimits): Promise<CappedBytes> {
  return withDeadline(limits, handle.path, async (live) => {
    const file = await openForReading(handle);
    try {
      const size = (await file.stat()).size;
      if (size === 0) return await readAll(file, limits.maxBytes, live);
      return await readSized(file, size, limits.maxBytes, live);
    } finally {
      await file.close();
    }
  });
}

/**
 * The first `maxBytes` of an open regular file of `size` bytes, read into one buffer of that size (capped), so a
 * large file costs its size once, not chunks and their concatenation; for use within withDeadline (`live`).
 */
export async function readSized(
  file: FileHandle,
  size: number,
  maxBytes: number,
  live: () => boolean,
): Promise<CappedBytes> {
  const bytes = Buffer.allocUnsafe(Math.min(size, maxBytes));
  let filled = 0;
  while (filled < bytes.length) {
    if (!live()) throw new Error('abandoned');
    const { bytesRead } = await file.read(bytes, filled, Math.min(chunkBytes, bytes.length - filled), filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return { bytes: bytes.subarray(0, filled), truncated: size > maxBytes };
}

/**
 * A trusted path (a /proc/PID file of ours, never a path inside a target) read whole up to `maxBytes` within the
 * deadline. procfs files report size 0, so the size is never trusted: reads go on until end of file or the cap.
 */
export async function readPathCapped(path: string, limits: ReadLimits): Promise<CappedBytes> {
  return withDeadline(limits, path, async (live) => {
    const file = await open(path, readFlags | constants.O_NOFOLLOW);
    try {
      return await readAll(file, limits.maxBytes, live);
    } finally {
      await file.close();
    }
  });
}

async function readAll(file: FileHandle, maxBytes: number, live: () => boolean): Promise<CappedBytes> {
  const chunks: Buffer[] = [];
  let total = 0;
  for (;;) {
    if (!live()) throw new Error('abandoned');
    // One byte past the cap tells a file of exactly maxBytes from a longer one.
    const want = Math.min(chunkBytes, maxBytes + 1 - total);
    const buffer = Buffer.allocUnsafe(want);
    const { bytesRead } = await file.read(buffer, 0, want, null);
    if (bytesRead === 0) break;
    chunks.push(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
    total += bytesRead;
    if (total > maxBytes) {
      const bytes = Buffer.concat(chunks, total).subarray(0, maxBytes);
      return { bytes, truncated: true };
    }
  }
  return { bytes: Buffer.concat(chunks, total), truncated: false };
}

export interface CopyResult {
  /** Bytes the copy holds (holes included). */
  bytes: number;
  /** Bytes actually written (holes in the source are not written, so the copy keeps them). */
  written: number;
}

/**
 * Copies bytes [from, to) of `source` to the same offsets of `dest`. Runs of zeros a whole chunk long are skipped,
 * so a sparse source gives a sparse copy instead of gigabytes of zeros on disk; the caller sets the final length.
 * `onChunk` sees every chunk read, in order (to hash the copy or show progress); it must not keep the buffer.
 */
export async function copyRange(
  source: FileHandle,
  dest: FileHandle,
  from: number,
  to: number,
  live: () => boolean = () => true,
  onChunk?: (chunk: Buffer) => void,
): Promise<CopyResult> {
  const buffer = Buffer.allocUnsafe(chunkBytes);
  let offset = from;
  let written = 0;
  while (offset < to) {
    if (!live()) throw new Error('abandoned');
    const want = Math.min(chunkBytes, to - offset);
    const { bytesRead } = await source.read(buffer, 0, want, offset);
    if (bytesRead === 0) break;
    const piece = buffer.subarray(0, bytesRead);
    onChunk?.(piece);
    if (!isAllZero(piece)) {
      await dest.write(piece, 0, bytesRead, offset);
      written += bytesRead;
    }
    offset += bytesRead;
  }
  return { bytes: offset, written };
}

const zeroChunk = Buffer.alloc(chunkBytes);

function isAllZero(bytes: Buffer): boolean {
  // A native comparison (memcmp): a byte loop in JavaScript ran at 0.5 GB/s, slower than the copy itself on a .NET
  // dump, half of whose chunks are zeros (npm run bench dump).
  if (bytes.length > chunkBytes) throw new RangeError('isAllZero takes one chunk at most');
  return bytes.equals(zeroChunk.subarray(0, bytes.length));
}

/**
 * Runs `work` with a deadline and the caller's abort signal. `live()` turns false once the deadline passed or the
 * signal fired, so loops inside `work` stop at their next step; the promise rejects at once either way, and
 * `onLate` receives what `work` gives after that (to close a handle nobody will use). Nothing starts when the signal
 * has fired already.
 */
export function withDeadline<T>(
  limits: Pick<ReadLimits, 'timeoutMs' | 'signal'>,
  what: string,
  work: (live: () => boolean) => Promise<T>,
  onLate?: (value: T) => void | Promise<void>,
): Promise<T> {
  let done = false;
  const live = () => !done;
  return new Promise<T>((resolve, reject) => {
    const finish = (error: unknown, value?: T) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      limits.signal?.removeEventListener('abort', onAbort);
      if (error === undefined) resolve(value as T);
      else reject(error);
    };
    const timer = setTimeout(
      () =>
        finish(
          new ProfcpuError('IO', `${what}: no answer within ${limits.timeoutMs} ms`, {
            remedy: 'The file system holding it does not answer (a hung network or FUSE mount?).',
          }),
        ),
      limits.timeoutMs,
    );
    const onAbort = () => finish(new ProfcpuError('ABORTED', `reading ${what} was interrupted`));
    if (limits.signal?.aborted) {
      onAbort();
      return;
    }
    limits.signal?.addEventListener('abort', onAbort, { once: true });
    work(live).then(
      (value) => {
        if (done) void Promise.resolve(onLate?.(value)).catch(() => undefined);
        finish(undefined, value);
      },
      (error: unknown) => finish(error ?? new Error('failed')),
    );
  });
}

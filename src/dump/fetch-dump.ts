// Moving a dump the runtime wrote out of the target's file system into an output folder: takes a handle on the
// target's temp folder (found inside its root, src/target/target-files.ts), the dump's name there and the output
// folder; gives the copy, its size and SHA-256, and removes the target's file. The target controls that folder, so
// what carries the name is checked before anything is read: a link (never followed), a FIFO or device (never opened),
// a file on a pseudo file system (a bind-mounted /proc/kcore), a hard link, or another user's file is refused; a
// file larger than the cap or than the output folder's free space is refused before a byte is copied; the copy is
// bounded by the size seen at the start, has a deadline and stops at Ctrl-C; a file that changed while it was
// copied is refused; looking it up, opening and unlinking it have deadlines too (a FUSE file system can hang them).
// The copy is written as `<name>.partial` and renamed only once complete and flushed, and the partial file is removed
// on any failure, so no half copy ever carries the final name.
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { open, unlink, type FileHandle } from 'node:fs/promises';
import type { Warn } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import { copyRange, openForReading, withDeadline } from '../files/bounded-read.js';
import { outputModes, type OutputFolder } from '../files/output-folder.js';
import { kindOf, PathHandle, pseudoFileSystemOf } from '../files/rooted.js';

export interface DumpFetchLimits {
  /** Largest dump copied, bytes (apparent size). Default 64 GiB. */
  maxBytes: number;
  /** Bytes left free on the output folder's file system after the copy. Default 256 MiB. */
  reserveBytes: number;
  /** Time allowed for the copy, ms. Default 30 min. */
  timeoutMs: number;
}

export const dumpFetchDefaults: Readonly<DumpFetchLimits> = Object.freeze({
  maxBytes: 64 * 1024 ** 3,
  reserveBytes: 256 * 1024 ** 2,
  timeoutMs: 30 * 60_000,
});

export interface DumpFetchOptions {
  /** The target's user: the dump must be theirs (createdump runs as the target). */
  uid: number;
  limits?: Partial<DumpFetchLimits>;
  signal?: AbortSignal | undefined;
  /** Told when the target's file cannot be removed. */
  warn?: Warn;
  /** Called after every chunk with the bytes copied so far and the dump's size. */
  onProgress?: (copied: number, total: number) => void;
}

export interface FetchedDump {
  /** Name of the copy in the output folder. */
  file: string;
  bytes: number;
  /** Bytes written to disk (zero chunks are left as holes). */
  written: number;
  sha256: string;
  copyMs: number;
}

/** Time allowed to look the dump up, open it, or unlink it, ms. */
const lookupTimeoutMs = 10_000;
const O_PATH = 0o10000000;
const O_CLOEXEC = 0o2000000;

/** `<folder>/<name>` of the target as shown in messages. */
const shown = (folder: PathHandle, name: string) => `${folder.path.replace(/\/$/, '')}/${name}`;

function refused(folder: PathHandle, name: string, reason: string): ProfcpuError {
  return new ProfcpuError('BAD_INPUT', `the dump ${shown(folder, name)} in the target is ${reason}`, {
    remedy:
      'The runtime reported a dump written, but what carries its name is not a file createdump wrote: something in the target replaced it. Nothing was copied.',
  });
}

/** A handle on the dump itself, refused unless it is the target user's own plain regular file on a real file system. */
async function openDump(folder: PathHandle, name: string, uid: number): Promise<PathHandle> {
  let file: FileHandle;
  try {
    file = await open(`${folder.kernelPath}/${name}`, O_PATH | constants.O_NOFOLLOW | O_CLOEXEC);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new ProfcpuError(
      'DUMP_REFUSED',
      `the runtime reported a dump written, but ${shown(folder, name)} is ${code === 'ENOENT' ? 'not there' : `unreadable (${code})`}`,
      {
        remedy: 'Something in the target removed it, or its temp folder is not the one the runtime sees.',
        cause: error,
      },
    );
  }
  const handle = new PathHandle(file, await file.stat(), shown(folder, name));
  try {
    const { stat } = handle;
    if (!stat.isFile()) throw refused(folder, name, `${kindOf(stat)}, not a regular file`);
    if (stat.nlink !== 1) throw refused(folder, name, `a file with ${stat.nlink} hard links, not a fresh file`);
    if (stat.uid !== uid) throw refused(folder, name, `owned by uid ${stat.uid}, not by the target’s user (${uid})`);
    const pseudo = await pseudoFileSystemOf(handle.kernelPath);
    if (pseudo) throw refused(folder, name, `a file on ${pseudo}`);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

/** Refuses a dump over the cap or larger than the output folder can hold with the reserve left. */
async function checkRoom(size: number, dest: OutputFolder, limits: DumpFetchLimits, where: string): Promise<void> {
  if (size === 0) throw new ProfcpuError('DUMP_REFUSED', `the dump ${where} is empty`);
  if (size > limits.maxBytes)
    throw new ProfcpuError(
      'NO_SPACE',
      `the dump ${where} is ${mib(size)}, more than the ${mib(limits.maxBytes)} allowed`,
      {
        remedy:
          'Raise --max-size if the target really is that large, or take a smaller dump type (--type mini or triage).',
      },
    );
  const free = await dest.freeBytes();
  if (size + limits.reserveBytes > free)
    throw new ProfcpuError(
      'NO_SPACE',
      `no room for the dump in ${dest.path}: it is ${mib(size)}, the file system there has ${mib(free)} free and ${mib(limits.reserveBytes)} are kept free`,
      { remedy: 'Free some space there, or give --output on a larger file system.' },
    );
}

export function mib(bytes: number): string {
  return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
}

/** Copies the dump `name` of the target's folder to `destName` in `dest`; removes the target's file in every case. */
export async function fetchDump(
  folder: PathHandle,
  name: string,
  dest: OutputFolder,
  destName: string,
  options: DumpFetchOptions,
): Promise<FetchedDump> {
  const limits = { ...dumpFetchDefaults, ...options.limits };
  try {
    // Looking a name up can hang too (a FUSE file system in the target): under a deadline, a late handle closed.
    const lookup = { timeoutMs: lookupTimeoutMs, signal: options.signal };
    const handle = await withDeadline(
      lookup,
      shown(folder, name),
      () => openDump(folder, name, options.uid),
      (late) => late.close(),
    );
    try {
      const source = await withDeadline(
        lookup,
        handle.path,
        () => openForReading(handle),
        (late) => late.close(),
      );
      try {
        return await copyOut(source, handle.path, dest, destName, limits, options);
      } finally {
        await source.close();
      }
    } finally {
      await handle.close();
    }
  } finally {
    // Whatever happened: a removal that fails is said, and neither hides the copy's own error nor undoes a good copy.
    await removeInTarget(folder, name).catch((error: unknown) => options.warn?.(describe(error)));
  }
}

function describe(error: unknown): string {
  return error instanceof ProfcpuError && error.remedy ? `${error.message}; ${error.remedy}` : String(error);
}

/** Unlinks `name` inside the folder held open (never a path that could lead elsewhere); nothing there is fine. */
export async function removeInTarget(folder: PathHandle, name: string): Promise<void> {
  const what = shown(folder, name);
  await withDeadline({ timeoutMs: lookupTimeoutMs }, what, () => unlink(`${folder.kernelPath}/${name}`)).catch(
    (error: unknown) => {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw new ProfcpuError('IO', `cannot remove the target’s copy of the dump ${shown(folder, name)}`, {
        remedy: 'Remove it by hand: it holds the target’s memory.',
        cause: error,
      });
    },
  );
}

async function copyOut(
  source: FileHandle,
  where: string,
  dest: OutputFolder,
  destName: string,
  limits: DumpFetchLimits,
  options: DumpFetchOptions,
): Promise<FetchedDump> {
  const size = (await source.stat()).size;
  await checkRoom(size, dest, limits, where);
  const partial = `${destName}.partial`;
  // Created before the deadline starts, so a copy given up on never creates a file after the partial one is removed.
  const out = await dest.create(partial, outputModes.privateFile);
  const started = performance.now();
  let complete = false;
  try {
    const hash = createHash('sha256');
    let copied = 0;
    const { bytes, written } = await withDeadline(
      { timeoutMs: limits.timeoutMs, signal: options.signal },
      where,
      (live) =>
        copyRange(source, out, 0, size, live, (chunk) => {
          hash.update(chunk);
          copied += chunk.length;
          options.onProgress?.(copied, size);
        }),
    ).catch((error: unknown) => {
      throw noSpace(error, dest) ?? error;
    });
    const now = (await source.stat()).size;
    if (bytes !== size || now !== size)
      throw new ProfcpuError(
        'BAD_INPUT',
        `the dump ${where} changed while it was copied (${size} bytes, then ${now})`,
        {
          remedy:
            'createdump had finished when the runtime answered: something in the target is writing to it. Nothing was kept.',
        },
      );
    // Holes at the end are not written by the copy: the length is set, then everything reaches the disk.
    await out.truncate(size);
    await out.sync().catch((error: unknown) => {
      throw noSpace(error, dest) ?? error;
    });
    await out.close();
    await dest.rename(partial, destName);
    complete = true;
    return {
      file: destName,
      bytes: size,
      written,
      sha256: hash.digest('hex'),
      copyMs: Math.round(performance.now() - started),
    };
  } finally {
    await out.close().catch(() => undefined);
    if (!complete) await dest.remove(partial);
  }
}

function noSpace(error: unknown, dest: OutputFolder): ProfcpuError | undefined {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return undefined;
  return new ProfcpuError('NO_SPACE', `the disk of ${dest.path} filled up while the dump was copied`, {
    remedy: 'Free some space there, or give --output on a larger file system. The partial copy was removed.',
    cause: error,
  });
}

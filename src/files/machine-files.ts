// Files of this machine that perf would read to name frames of a recording made here (a binary at the path perf
// recorded, a copy in perf's build-id cache, a runtime's /tmp/perf-<pid>.map): takes an absolute path, gives the
// opened regular file or its bytes, within a cap and a deadline. A recorded path comes from perf.data, which may come
// from anybody: nothing but a regular file is opened (stat first: opening a device or a FIFO may act, a watchdog arms,
// a writer wakes), the file opened is checked to be the one seen, and a read that does not end is abandoned.
import { constants } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { readLimitDefaults, readSized, withDeadline, type CappedBytes } from './bounded-read.js';

/**
 * A regular file of this machine opened for reading, or undefined. stat comes first: opening anything else may act
 * (a watchdog arms, a tape rewinds, a FIFO's writer wakes); the fstat after checks the file opened is the one seen.
 */
export async function openMachineFile(path: string): Promise<FileHandle | undefined> {
  if (!path.startsWith('/') || path.startsWith('/memfd:') || path.endsWith(' (deleted)')) return undefined;
  const seen = await stat(path).catch(() => undefined);
  if (!seen?.isFile()) return undefined;
  const handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY).catch(
    () => undefined,
  );
  if (!handle) return undefined;
  const opened = await handle.stat().catch(() => undefined);
  if (opened?.isFile() && opened.dev === seen.dev && opened.ino === seen.ino) return handle;
  await handle.close();
  return undefined;
}

/**
 * A regular file of this machine (openMachineFile's rules) read whole within bounded-read.ts's default deadline, or
 * undefined when it is none, empty, cannot be read in time, or holds more than `maxBytes`; with `truncate`, a larger
 * file gives its first `maxBytes` instead.
 */
export async function readMachineFile(
  path: string,
  maxBytes: number,
  { truncate = false, timeoutMs = readLimitDefaults.timeoutMs }: { truncate?: boolean; timeoutMs?: number } = {},
): Promise<CappedBytes | undefined> {
  const read = async (live: () => boolean): Promise<CappedBytes | undefined> => {
    const handle = await openMachineFile(path);
    if (!handle) return undefined;
    try {
      const { size } = await handle.stat();
      if (size <= 0 || (size > maxBytes && !truncate)) return undefined;
      return await readSized(handle, size, maxBytes, live);
    } finally {
      await handle.close();
    }
  };
  return withDeadline({ timeoutMs }, path, read).catch(() => undefined);
}

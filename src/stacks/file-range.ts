// Reading parts of a file for the fold: a byte range in chunks (readRange, also what each fold worker reads) and a
// window at an offset (readWindow, to find where a range may start). Takes a path and offsets; gives bytes.
import { open } from 'node:fs/promises';

const CHUNK = 1 << 20;

/**
 * Bytes [start, end) of a file in chunks read into two reused buffers: a chunk is valid until the next is asked for
 * (the folder copies what it keeps), so memory stays flat however large the file. The next chunk is read while the
 * caller works on this one (the read runs on libuv's thread pool), so folding seldom waits for the disk.
 */
export async function* readRange(
  path: string,
  start: number,
  end: number,
  signal?: AbortSignal,
): AsyncGenerator<Buffer, void, undefined> {
  const file = await open(path, 'r');
  const buffers = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)] as const;
  const read = (buf: Buffer, position: number) => {
    if (position >= end) return undefined;
    const reading = file.read(buf, 0, Math.min(CHUNK, end - position), position);
    // Its failure is thrown where it is awaited; until then it must not count as unhandled.
    reading.catch(() => undefined);
    return reading;
  };
  let position = start;
  let pending = read(buffers[0], position);
  try {
    for (let n = 0; pending !== undefined; n++) {
      signal?.throwIfAborted();
      const { bytesRead, buffer } = await pending;
      if (bytesRead === 0) break;
      position += bytesRead;
      pending = read(buffers[(n + 1) % 2]!, position);
      yield buffer.subarray(0, bytesRead);
    }
  } finally {
    // A read still under way must end before its file is closed.
    await pending?.catch(() => undefined);
    await file.close();
  }
}

/** Up to `length` bytes of the file at `position`. */
export async function readWindow(path: string, position: number, length: number): Promise<Buffer> {
  const file = await open(path, 'r');
  try {
    const buf = Buffer.alloc(length);
    const { bytesRead } = await file.read(buf, 0, length, position);
    return buf.subarray(0, bytesRead);
  } finally {
    await file.close();
  }
}

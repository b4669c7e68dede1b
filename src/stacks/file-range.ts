// Reading parts of a file for the fold: a byte range in chunks (readRange, also what each fold worker reads) and a
// window at an offset (readWindow, to find where a range may start). Takes a path and offsets; gives bytes.
import { open } from 'node:fs/promises';

const CHUNK = 1 << 20;

/**
 * Bytes [start, end) of a file in chunks read into one reused buffer: a chunk is valid until the next is asked
 * for (the folder copies what it keeps), so memory stays flat however large the file.
 */
export async function* readRange(
  path: string,
  start: number,
  end: number,
  signal?: AbortSignal,
): AsyncGenerator<Buffer, void, undefined> {
  const file = await open(path, 'r');
  try {
    const buf = Buffer.allocUnsafe(CHUNK);
    for (let position = start; position < end;) {
      signal?.throwIfAborted();
      const { bytesRead } = await file.read(buf, 0, Math.min(CHUNK, end - position), position);
      if (bytesRead === 0) break;
      position += bytesRead;
      yield buf.subarray(0, bytesRead);
    }
  } finally {
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

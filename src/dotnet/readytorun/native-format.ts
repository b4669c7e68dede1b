// The "native format" encodings ReadyToRun images use for their lookup tables (readytorun-format.md, "Native
// Format"): variable-length unsigned and signed integers, the sparse NativeArray (MethodDefEntryPoints) and the
// NativeHashtable (InstanceMethodEntryPoints), enumerated whole. Offsets are into the image's bytes; every read is
// checked by the ByteReader, and enumeration is bounded by the table's own extent.

import { ByteReader, PeFormatError } from './pe-image.js';

/** An integer and the offset just past it. */
export interface Decoded {
  value: number;
  next: number;
}

export function decodeUnsigned(r: ByteReader, at: number): Decoded {
  const b = r.u8(at, 'native integer');
  if ((b & 1) === 0) return { value: b >>> 1, next: at + 1 };
  if ((b & 2) === 0) return { value: (b >>> 2) | (r.u8(at + 1) << 6), next: at + 2 };
  if ((b & 4) === 0) return { value: (b >>> 3) | (r.u8(at + 1) << 5) | (r.u8(at + 2) << 13), next: at + 3 };
  if ((b & 8) === 0)
    return {
      value: ((b >>> 4) | (r.u8(at + 1) << 4) | (r.u8(at + 2) << 12) | (r.u8(at + 3) << 20)) >>> 0,
      next: at + 4,
    };
  if ((b & 16) === 0) return { value: r.u32(at + 1), next: at + 5 };
  throw new PeFormatError(`bad native integer at ${at}`);
}

export function decodeSigned(r: ByteReader, at: number): Decoded {
  const b = r.u8(at, 'native integer');
  if ((b & 1) === 0) return { value: (b << 24) >> 25, next: at + 1 };
  if ((b & 2) === 0) return { value: (((r.u8(at + 1) << 8) | b) << 16) >> 18, next: at + 2 };
  if ((b & 4) === 0) return { value: (((r.u8(at + 2) << 16) | (r.u8(at + 1) << 8) | b) << 8) >> 11, next: at + 3 };
  if ((b & 8) === 0)
    return { value: ((r.u8(at + 3) << 24) | (r.u8(at + 2) << 16) | (r.u8(at + 1) << 8) | b) >> 4, next: at + 4 };
  if ((b & 16) === 0) return { value: r.u32(at + 1) | 0, next: at + 5 };
  throw new PeFormatError(`bad native integer at ${at}`);
}

const blockSize = 16;

/**
 * Every element of a NativeArray starting at `at`: calls `visit(index, offsetOfElement)` for each present index, in
 * order. At most `maxElements` indices are looked at (the array's own count is the target's word).
 */
export function forEachNativeArrayElement(
  r: ByteReader,
  at: number,
  maxElements: number,
  visit: (index: number, offset: number) => void,
): void {
  const header = decodeUnsigned(r, at);
  const entrySize = header.value & 3;
  if (entrySize === 3) throw new PeFormatError('NativeArray with a bad entry size');
  const count = Math.min(header.value >>> 2, maxElements);
  const base = header.next;
  for (let index = 0; index < count; index++) {
    const offset = elementOffset(r, base, entrySize, index);
    if (offset !== undefined) visit(index, offset);
  }
}

function elementOffset(r: ByteReader, base: number, entrySize: number, index: number): number | undefined {
  const slot = Math.floor(index / blockSize);
  let offset =
    base + (entrySize === 0 ? r.u8(base + slot) : entrySize === 1 ? r.u16(base + 2 * slot) : r.u32(base + 4 * slot));
  for (let bit = blockSize >> 1; bit > 0; bit >>= 1) {
    const node = decodeUnsigned(r, offset);
    if (index & bit) {
      if (node.value & 2) {
        offset += node.value >>> 2;
        continue;
      }
    } else if (node.value & 1) {
      offset = node.next;
      continue;
    }
    // A leaf that stands for one index of the block, whatever the remaining bits.
    if ((node.value & 3) === 0 && node.value >>> 2 === (index & (blockSize - 1))) return node.next;
    return undefined;
  }
  return offset;
}

/**
 * Every entry of a NativeHashtable at `at` whose table ends before `end`: calls `visit(offsetOfEntry)`. Entries
 * point at their data by a signed offset from where the offset is stored; entries pointing outside the image are
 * skipped by the reads that follow, not here.
 */
export function forEachNativeHashtableEntry(
  r: ByteReader,
  at: number,
  end: number,
  visit: (offset: number) => void,
): void {
  const header = r.u8(at, 'hashtable header');
  const base = at + 1;
  const bucketShift = header >>> 2;
  const entrySize = header & 3;
  if (entrySize === 3 || bucketShift > 24) throw new PeFormatError('NativeHashtable with a bad header');
  const buckets = 1 << bucketShift;
  if (buckets > end - at) throw new PeFormatError('NativeHashtable with more buckets than bytes');
  const cell = (i: number) =>
    entrySize === 0 ? r.u8(base + i) : entrySize === 1 ? r.u16(base + 2 * i) : r.u32(base + 4 * i);
  // Buckets follow one another: each is walked once, so the work is bounded by the table's size.
  let previousStop = base;
  for (let bucket = 0; bucket < buckets; bucket++) {
    let offset = base + cell(bucket);
    const stop = Math.min(base + cell(bucket + 1), end);
    if (offset < previousStop || stop < offset) throw new PeFormatError('NativeHashtable buckets out of order');
    previousStop = stop;
    while (offset < stop) {
      offset += 1; // the low byte of the entry's hash
      const delta = decodeSigned(r, offset);
      visit(offset + delta.value);
      offset = delta.next;
    }
  }
}

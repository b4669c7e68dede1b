// A perf.data whose perf was killed, made whole. When a target's PID namespace ends (`docker stop`, or the app
// exiting as the container's first process), every process in it is killed, perf and profcpu included. collect
// records so that this loses almost nothing: perf writes its header (attributes, data offset) when it starts and each
// sample as it comes (`--no-buffering`), with the build-id of every mapped file inside its mapping record
// (`--buildid-mmap`), so the file on disk holds every sample up to the kill. What it lacks is what perf writes on
// exit: the size of the data in the header, and the feature sections after the data. This module takes such a file
// in an output folder; gives the same file with the data cut after its last whole record and that size in the
// header, through a temporary file renamed over it. No feature section but one: perf script needs none of them, but
// to read compressed records (perf record -z) it needs HEADER_COMPRESSED's buffer size, which is written then.
//
// perf.data layout (tools/perf/Documentation/perf.data-file-format.txt): a 104-byte header (magic PERFILE2, header
// size, attribute size, the attribute, data and event-type sections as {offset, size}, a 256-bit feature bitmap),
// the attributes and their id arrays, then the data: records of an 8-byte header (type u32, misc u16, size u16) and
// their body. The folder may have come from somebody else: every size read from the file is checked before use.
import type { FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import { openForReading } from '../files/bounded-read.js';
import { outputModes, type OutputFolder } from '../files/output-folder.js';

export type PerfDataState =
  /** perf finished it: it says how much data it holds. */
  | 'finished'
  /** perf was stopped before it finished: a valid header, no data size. */
  | 'unfinished'
  /** Not a perf.data in file mode (no file, no magic, another layout). */
  | 'unreadable';

export interface Recovered {
  /** Bytes of whole records kept. */
  dataBytes: number;
  /** Undefined when the records are compressed (perf record -z): the samples are inside them. */
  samples: number | undefined;
  /** Bytes after the last whole record, left out (a record perf was writing when it was killed). */
  cutBytes: number;
}

const headerBytes = 104;
/** Header and attributes: a few KiB even with a thousand CPUs. */
const maxPrefixBytes = 16 << 20;
const sampleRecord = 9;
/** PERF_RECORD_COMPRESSED (perf record -z) and perf 7's COMPRESSED2: samples inside them are not counted here. */
const compressedRecord = 81;
const compressedRecords = new Set([compressedRecord, 83]);

interface Header {
  dataOffset: number;
  dataSize: number;
}

/** Whether perf finished `name` in `folder`. */
export async function perfDataState(folder: OutputFolder, name: string): Promise<PerfDataState> {
  const file = await openIn(folder, name).catch(() => undefined);
  if (!file) return 'unreadable';
  try {
    const header = readHeader(await readAt(file.handle, 0, headerBytes), file.size, name);
    return header.dataSize > 0 ? 'finished' : 'unfinished';
  } catch {
    return 'unreadable';
  } finally {
    await file.handle.close();
  }
}

/** Makes the unfinished `name` in `folder` a finished perf.data; see the top of this file. */
export async function recoverPerfData(folder: OutputFolder, name: string, signal?: AbortSignal): Promise<Recovered> {
  const file = await openIn(folder, name);
  const temp = `${name}.recovering`;
  try {
    const header = readHeader(await readAt(file.handle, 0, headerBytes), file.size, name);
    const walk = await walkRecords(file, header.dataOffset, file.size, signal);
    const prefix = await readAt(file.handle, 0, header.dataOffset);
    prefix.writeBigUInt64LE(BigInt(walk.end - header.dataOffset), 48);
    // The feature sections were never written: no bit may claim one, but the compression's.
    prefix.fill(0, 72, headerBytes);
    if (walk.compressed > 0) prefix[72 + (compressedFeature >> 3)]! |= 1 << (compressedFeature & 7);
    const out = await folder.create(temp, outputModes.privateFile);
    try {
      await out.write(prefix, 0, prefix.length, 0);
      await copy(file.handle, out, header.dataOffset, walk.end, signal);
      if (walk.compressed > 0) await out.write(compressedSection(walk.end), 0, undefined, walk.end);
      // The recording's time, not the recovery's: the tarball is dated by perf.data's mtime.
      await out.utimes(file.atime, file.mtime);
    } finally {
      await out.close();
    }
    await folder.rename(temp, name);
    return {
      dataBytes: walk.end - header.dataOffset,
      samples: walk.compressed > 0 ? undefined : walk.samples,
      cutBytes: file.size - walk.end,
    };
  } catch (error) {
    await folder.remove(temp).catch(() => undefined);
    throw error;
  } finally {
    await file.handle.close();
  }
}

/**
 * HEADER_COMPRESSED (feature 27), as perf writes it: version, type (1: zstd), level, ratio, then the buffer perf
 * decompresses each record into, which must hold what one record expands to: perf's ring buffer, 516 KiB by default
 * (collect never sets -m). The feature table (its one section's offset and size) comes first, right after the data.
 */
const compressedFeature = 27;
const compressionBufferBytes = 4 << 20;

function compressedSection(dataEnd: number): Buffer {
  const section = Buffer.alloc(16 + 20);
  section.writeBigUInt64LE(BigInt(dataEnd + 16), 0);
  section.writeBigUInt64LE(20n, 8);
  section.writeUInt32LE(0, 16);
  section.writeUInt32LE(1, 20);
  section.writeUInt32LE(1, 24);
  section.writeUInt32LE(0, 28);
  section.writeUInt32LE(compressionBufferBytes, 32);
  return section;
}

/** Parses and checks a file-mode perf.data header against the file's size. */
function readHeader(bytes: Buffer, fileSize: number, name: string): Header {
  const damaged = (why: string) => new ProfcpuError('BAD_INPUT', `${name} is not a perf.data profcpu can read: ${why}`);
  if (bytes.length < headerBytes) throw damaged('shorter than a header');
  const magic = bytes.toString('latin1', 0, 8);
  if (magic === '2ELIFREP') throw damaged('written on a big-endian machine');
  if (magic !== 'PERFILE2') throw damaged('no PERFILE2 magic (perf stopped before it wrote its header?)');
  if (u64(bytes, 8) !== headerBytes) throw damaged(`a header of ${u64(bytes, 8)} bytes`);
  const attrSize = u64(bytes, 16);
  const attrsOffset = u64(bytes, 24);
  const attrsSize = u64(bytes, 32);
  const dataOffset = u64(bytes, 40);
  const dataSize = u64(bytes, 48);
  if (attrSize < 16 + 64 || attrSize > 16 + 4096 || attrSize % 8 !== 0)
    throw damaged(`attributes of ${attrSize} bytes`);
  if (attrsSize === 0 || attrsSize % attrSize !== 0) throw damaged('an attribute section of whole attributes');
  if (dataOffset < headerBytes || dataOffset > maxPrefixBytes) throw damaged('its data offset');
  if (attrsOffset < headerBytes || attrsOffset + attrsSize > dataOffset) throw damaged('its attribute section');
  if (dataOffset + dataSize > fileSize) throw damaged('a data section past the end of the file');
  return { dataOffset, dataSize };
}

/**
 * The samples in a finished `name`: perf record no longer counts them when build-ids come with the mappings (it
 * reads its file back only to collect build-ids). Undefined when the file is not finished, or its records are
 * compressed (postprocess counts those).
 */
export async function countSamples(folder: OutputFolder, name: string, signal?: AbortSignal) {
  const file = await openIn(folder, name);
  try {
    const header = readHeader(await readAt(file.handle, 0, headerBytes), file.size, name);
    if (header.dataSize === 0) return undefined;
    const walk = await walkRecords(file, header.dataOffset, header.dataOffset + header.dataSize, signal);
    return walk.compressed > 0 ? undefined : walk.samples;
  } finally {
    await file.handle.close();
  }
}

/** Walks the records in [start, limit): where the last whole one ends, the samples, and the compressed records. */
async function walkRecords(
  file: Opened,
  start: number,
  limit: number,
  signal: AbortSignal | undefined,
): Promise<{ end: number; samples: number; compressed: number }> {
  const chunk = Buffer.allocUnsafe(4 << 20);
  let samples = 0;
  let compressed = 0;
  let offset = start;
  let chunkStart = start;
  let chunkLength = 0;
  while (offset + 8 <= limit) {
    if (offset + 8 > chunkStart + chunkLength) {
      if (signal?.aborted) throw new ProfcpuError('ABORTED', `reading ${file.name} was interrupted`);
      chunkStart = offset;
      chunkLength = (await file.handle.read(chunk, 0, Math.min(chunk.length, limit - offset), offset)).bytesRead;
      if (chunkLength < 8) break;
    }
    const at = offset - chunkStart;
    const type = chunk.readUInt32LE(at);
    const size = chunk.readUInt16LE(at + 6);
    // perf's records are whole 8-byte words, but for perf 6's COMPRESSED (its payload unpadded); zeros are where
    // perf's writing stopped.
    if (size < 8 || (size % 8 !== 0 && type !== compressedRecord) || offset + size > limit) break;
    if (type === sampleRecord) samples++;
    else if (compressedRecords.has(type)) compressed++;
    offset += size;
  }
  return { end: offset, samples, compressed };
}

async function copy(source: FileHandle, dest: FileHandle, from: number, to: number, signal?: AbortSignal) {
  const buffer = Buffer.allocUnsafe(Math.max(1, Math.min(4 << 20, to - from)));
  for (let at = from; at < to;) {
    if (signal?.aborted) throw new ProfcpuError('ABORTED', 'recovering perf.data was interrupted');
    const { bytesRead } = await source.read(buffer, 0, Math.min(buffer.length, to - at), at);
    if (bytesRead === 0) throw new ProfcpuError('BAD_INPUT', 'perf.data shrank while it was recovered');
    await dest.write(buffer, 0, bytesRead, at);
    at += bytesRead;
  }
}

interface Opened {
  name: string;
  handle: FileHandle;
  size: number;
  /** When perf last wrote it: the finished file keeps these times, so a rerun dates its outputs the same. */
  atime: Date;
  mtime: Date;
}

async function openIn(folder: OutputFolder, name: string): Promise<Opened> {
  const path = await folder.lookup(name, 'file');
  try {
    const { size, atime, mtime } = path.stat;
    return { name, handle: await openForReading(path), size, atime, mtime };
  } finally {
    await path.close();
  }
}

async function readAt(handle: FileHandle, offset: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const { bytesRead } = await handle.read(buffer, read, length - read, offset + read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  return buffer.subarray(0, read);
}

/** A u64 as a number; past 2^53 it is Infinity, which every bound refuses. */
function u64(bytes: Buffer, at: number): number {
  const value = bytes.readBigUInt64LE(at);
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(value);
}

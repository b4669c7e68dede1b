// A perf.data reader that needs no perf: takes a file (file mode: PERFILE2 header, attributes, data section, feature
// sections after the data) or a stream (pipe mode, `perf record -o -`: a 16-byte header, then HEADER_ATTR and
// HEADER_FEATURE records before the data), gives the recording's attributes and features and its MMAP, MMAP2, COMM,
// FORK, EXIT, SAMPLE and LOST events in the order perf script delivers them (order.ts).
//
// The file may come from anybody: the data is streamed (never held whole), each size and count read from it is
// checked against the file and against `limits` before anything is allocated, and a damaged file ends in a BAD_INPUT
// ProfcpuError naming the offset, never a hang: every record advances by at least 8 bytes and the data section has an
// end. Records profcpu does not use are counted and skipped; compressed records (`perf record -z`) are decompressed
// (compressed.ts) and their records read as the others. This file opens the file or stream and reads its header; the
// walk over the records is record-walk.ts.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../../error.js';
import { ByteStream } from './byte-stream.js';
import { CompressedStreamError, zstdStartError } from './compressed.js';
import { decodeFeature, type Features } from './features.js';
import { attrMinBytes, badInput, decodeAttr, feature, limits, recordType, type EventAttr } from './format.js';

import { RecordError } from './records.js';
import {
  compressedPayload,
  deliverRecords,
  nameEvents,
  safe,
  type PerfDataHeader,
  type ReadHandlers,
  type ReadOptions,
  type ReadSummary,
} from './record-walk.js';

export type { PerfEvent } from './records.js';
export type { FileFacts, PerfDataHeader, ReadHandlers, ReadOptions, ReadSummary } from './record-walk.js';

const fileHeaderBytes = 104;
const pipeHeaderBytes = 16;
const readChunkBytes = 1 << 20;

/** Reads the perf.data at `path` (file or pipe mode) through `handlers`. */
export async function readPerfDataFile(
  path: string,
  handlers: ReadHandlers,
  options: ReadOptions = {},
): Promise<ReadSummary> {
  const name = options.name ?? path;
  const { file, size, mtimeMs } = await openPerfData(path, name);
  try {
    const start = await readAt(file, 0, fileHeaderBytes);
    if (start.length >= pipeHeaderBytes && isMagic(start, name) && start.readBigUInt64LE(8) === 16n) {
      const chunks = file.createReadStream({
        start: pipeHeaderBytes,
        highWaterMark: options.chunkBytes ?? readChunkBytes,
        autoClose: false,
      });
      // perf counts a pipe's offsets from the end of its header.
      return await readPipeRecords(new ByteStream(chunks, 0), handlers, name, options);
    }
    const header = await readFileHeader(file, start, size, name);
    header.parsed.file = { ...header.parsed.file!, mtimeMs };
    if (header.dataSize === 0)
      return await deliverRecords(new ByteStream(empty()), header.parsed, handlers, name, options, 0);
    const chunks = file.createReadStream({
      start: header.dataOffset,
      end: header.dataOffset + header.dataSize - 1,
      highWaterMark: options.chunkBytes ?? readChunkBytes,
      autoClose: false,
    });
    const stream = new ByteStream(chunks, header.dataOffset);
    return await deliverRecords(stream, header.parsed, handlers, name, options, header.dataOffset + header.dataSize);
  } finally {
    await file.close();
  }
}

/** What inspectPerfData learns from a perf.data's header and its first records. */
export interface PerfDataOutline {
  header: PerfDataHeader;
  /** The recording holds hardware trace data (AUXTRACE_INFO: Intel PT, CoreSight...), from which perf makes samples. */
  auxtrace: boolean;
  /** The first compressed record's zstd stream was refused (a window larger than profcpu decodes, or damaged). */
  compressedError: CompressedStreamError | undefined;
  /** The walk reached the end of the records (a short recording: nothing left unseen). */
  complete: boolean;
}

/** Bytes of records inspectPerfData walks at most, and reads at a time. */
const outlineBytes = 256 << 20;
const windowBytes = 1 << 20;

/**
 * The attributes and features of the perf.data at `path` (file or pipe mode) and what its records say up to the first
 * sample or compressed record (256 MiB of them at most: a pipe's attributes, trace data, the start of a compressed
 * stream), without delivering any event.
 * Throws as readPerfDataFile does for a file that is not a perf.data.
 */
export async function inspectPerfData(path: string, options: Pick<ReadOptions, 'name'> = {}): Promise<PerfDataOutline> {
  const name = options.name ?? path;
  const { file, size } = await openPerfData(path, name);
  try {
    const start = await readAt(file, 0, fileHeaderBytes);
    let header: PerfDataHeader;
    let from: number;
    let end: number;
    if (start.length >= pipeHeaderBytes && isMagic(start, name) && start.readBigUInt64LE(8) === 16n) {
      header = { mode: 'pipe', attrs: [], features: { buildIds: [] } };
      [from, end] = [pipeHeaderBytes, size];
    } else {
      const fileHeader = await readFileHeader(file, start, size, name);
      header = fileHeader.parsed;
      [from, end] = [fileHeader.dataOffset, fileHeader.dataOffset + fileHeader.dataSize];
    }
    const outline: PerfDataOutline = { header, auxtrace: false, compressedError: undefined, complete: false };
    // The records are walked a window at a time, up to the first sample or compressed record (or outlineBytes): what
    // comes before them is perf's synthesized records, a pipe's attributes, trace data.
    let at = from;
    let window: Buffer = Buffer.alloc(0);
    let windowAt = from;
    walk: while (at < end && at - from < outlineBytes) {
      if (at + 8 > windowAt + window.length) {
        window = await readAt(file, at, Math.min(end - at, windowBytes));
        windowAt = at;
        if (window.length < 8) break;
      }
      const here = at - windowAt;
      const type = window.readUInt32LE(here);
      const size = window.readUInt16LE(here + 6);
      if (size < 8 || at + size > end) break;
      if (here + size > window.length) {
        window = await readAt(file, at, Math.min(end - at, Math.max(windowBytes, size)));
        windowAt = at;
        continue;
      }
      const record = window.subarray(here, here + size);
      at += size;
      switch (type) {
        case recordType.sample:
          // Samples outside compressed records: the recording is not compressed.
          break walk;
        case recordType.auxtraceInfo:
          outline.auxtrace = true;
          break;
        case recordType.headerAttr:
          if (header.mode === 'pipe' && size >= 8 + attrMinBytes) {
            const attrBytes = record.readUInt32LE(12);
            if (attrBytes >= attrMinBytes && 8 + attrBytes <= size && header.attrs.length < limits.maxAttrs)
              header.attrs.push({ ...decodeAttr(record, 8, attrBytes), ids: [], name: undefined });
          }
          break;
        case recordType.headerTracingData:
          // Its data follows the record, padded to 8 bytes (as deliverRecords skips it).
          if (size >= 12) at += Math.ceil(record.readUInt32LE(8) / 8) * 8;
          break;
        case recordType.auxtrace:
          if (size >= 16) at += safe(record.readBigUInt64LE(8));
          break;
        case recordType.compressed:
        case recordType.compressed2:
          // Only the stream's start is checked here: the rest is read with it (a damaged record too, saying where).
          try {
            outline.compressedError = zstdStartError(compressedPayload(record, type));
          } catch (error) {
            if (!(error instanceof RecordError)) throw error;
          }
          break walk;
      }
    }
    outline.complete = at >= end;
    return outline;
  } finally {
    await file.close();
  }
}

/** The perf.data at `path` opened, and its size: a regular file, or a BAD_INPUT (a FIFO there is not waited on). */
async function openPerfData(path: string, name: string): Promise<{ file: FileHandle; size: number; mtimeMs: number }> {
  let file: FileHandle;
  try {
    // NONBLOCK: a FIFO in perf.data's place must not wait for a writer; it is refused below.
    file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    throw new ProfcpuError('NO_PERF_DATA', `cannot open ${name}: ${(error as Error).message}`, { cause: error });
  }
  try {
    const stats = await file.stat();
    if (!stats.isFile()) throw badInput(name, 'not a regular file');
    return { file, size: stats.size, mtimeMs: stats.mtimeMs };
  } catch (error) {
    await file.close();
    throw error;
  }
}

/** Reads a pipe-mode perf.data from a stream of chunks (perf record -o - piped in). */
export async function readPerfDataStream(
  chunks: AsyncIterable<Buffer>,
  handlers: ReadHandlers,
  options: ReadOptions & { name: string },
): Promise<ReadSummary> {
  const stream = new ByteStream(chunks);
  const start = await stream.read(pipeHeaderBytes);
  if (start.length < pipeHeaderBytes || !isMagic(start, options.name) || start.readBigUInt64LE(8) !== 16n)
    throw badInput(options.name, 'not a pipe-mode perf.data (no 16-byte PERFILE2 header)');
  stream.position = 0;
  return readPipeRecords(stream, handlers, options.name, options);
}

async function* empty(): AsyncIterable<Buffer> {}

function isMagic(bytes: Buffer, name: string): boolean {
  const magic = bytes.toString('latin1', 0, 8);
  if (magic === '2ELIFREP') throw badInput(name, 'written on a big-endian machine');
  if (magic === 'PERFFILE') throw badInput(name, 'the first perf.data format (PERFFILE), from before Linux 2.6.33');
  if (magic !== 'PERFILE2') throw badInput(name, 'no PERFILE2 magic');
  return true;
}

interface FileHeader {
  dataOffset: number;
  dataSize: number;
  parsed: PerfDataHeader;
}

async function readFileHeader(file: FileHandle, bytes: Buffer, fileSize: number, name: string): Promise<FileHeader> {
  if (bytes.length < fileHeaderBytes) throw badInput(name, 'shorter than its header');
  const u64 = (at: number) => safe(bytes.readBigUInt64LE(at));
  if (u64(8) !== fileHeaderBytes) throw badInput(name, `a header of ${bytes.readBigUInt64LE(8)} bytes`);
  const attrSize = u64(16);
  const [attrsOffset, attrsSize] = [u64(24), u64(32)];
  const [dataOffset, dataSize] = [u64(40), u64(48)];
  if (attrSize < attrMinBytes + 16 || attrSize > limits.maxAttrBytes + 16 || attrSize % 8 !== 0)
    throw badInput(name, `attributes of ${attrSize} bytes`);
  if (attrsSize === 0 || attrsSize % attrSize !== 0) throw badInput(name, 'an attribute section of no whole attribute');
  if (attrsSize / attrSize > limits.maxAttrs) throw badInput(name, `${attrsSize / attrSize} attributes`);
  if (attrsOffset + attrsSize > fileSize) throw badInput(name, 'an attribute section past the end of the file');
  if (dataOffset < fileHeaderBytes || dataOffset + dataSize > fileSize)
    throw badInput(name, 'a data section past the end of the file (cut short?)');
  const attrBytes = await readAt(file, attrsOffset, attrsSize);
  const attrs: EventAttr[] = [];
  for (let at = 0; at < attrsSize; at += attrSize) {
    const [idsOffset, idsSize] = [
      safe(attrBytes.readBigUInt64LE(at + attrSize - 16)),
      safe(attrBytes.readBigUInt64LE(at + attrSize - 8)),
    ];
    if (idsSize % 8 !== 0 || idsSize / 8 > limits.maxIdsPerAttr || idsOffset + idsSize > fileSize)
      throw badInput(name, `an attribute whose ids lie outside the file`);
    const idBytes = await readAt(file, idsOffset, idsSize);
    const ids: bigint[] = [];
    for (let i = 0; i + 8 <= idBytes.length; i += 8) ids.push(idBytes.readBigUInt64LE(i));
    attrs.push({ ...decodeAttr(attrBytes, at, attrSize - 16), ids, name: undefined });
  }
  const features: Features = { buildIds: [] };
  // The feature sections follow the data: a table of {offset, size}, one per bit set, in bit order.
  const bits: number[] = [];
  for (let bit = 0; bit < 256; bit++) if (bytes[72 + (bit >> 3)]! & (1 << (bit & 7))) bits.push(bit);
  if (bits.includes(feature.dirFormat)) throw badInput(name, 'a directory-format recording (perf record --threads)');
  const tableAt = dataOffset + dataSize;
  if (bits.length > 0 && dataSize > 0 && tableAt + bits.length * 16 <= fileSize) {
    const table = await readAt(file, tableAt, bits.length * 16);
    for (const [i, bit] of bits.entries()) {
      if (!(Object.values(feature) as number[]).includes(bit) || bit === feature.dirFormat) continue;
      const [offset, size] = [safe(table.readBigUInt64LE(i * 16)), safe(table.readBigUInt64LE(i * 16 + 8))];
      if (size > limits.maxFeatureBytes || offset + size > fileSize)
        throw badInput(name, `feature section ${bit} of ${size} bytes at ${offset}`);
      try {
        decodeFeature(bit, await readAt(file, offset, size), features);
      } catch (error) {
        throw badInput(name, `feature section ${bit}: ${(error as Error).message}`, error);
      }
    }
  }
  const parsed: PerfDataHeader = {
    mode: 'file',
    attrs,
    features,
    file: { mtimeMs: 0, dataOffset, dataSize, featureBits: bits },
  };
  nameEvents(parsed);
  return { dataOffset, dataSize, parsed };
}

/** Pipe mode: attributes and features come as records before the data. */
async function readPipeRecords(
  stream: ByteStream,
  handlers: ReadHandlers,
  name: string,
  options: ReadOptions,
): Promise<ReadSummary> {
  const header: PerfDataHeader = { mode: 'pipe', attrs: [], features: { buildIds: [] } };
  return deliverRecords(stream, header, handlers, name, options, Number.POSITIVE_INFINITY);
}

async function readAt(file: FileHandle, offset: number, length: number): Promise<Buffer> {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const { bytesRead } = await file.read(buffer, read, length - read, offset + read);
    if (bytesRead === 0) break;
    read += bytesRead;
  }
  return buffer.subarray(0, read);
}

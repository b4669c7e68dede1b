// A perf.data reader that needs no perf: takes a file (file mode: PERFILE2 header, attributes, data section, feature
// sections after the data) or a stream (pipe mode, `perf record -o -`: a 16-byte header, then HEADER_ATTR and
// HEADER_FEATURE records before the data), gives the recording's attributes and features and its MMAP, MMAP2, COMM,
// FORK, EXIT, SAMPLE and LOST events in the order perf script delivers them (order.ts).
//
// The file may come from anybody: the data is streamed (never held whole), each size and count read from it is
// checked against the file and against `limits` before anything is allocated, and a damaged file ends in a BAD_INPUT
// ProfcpuError naming the offset, never a hang: every record advances by at least 8 bytes and the data section has an
// end. Records profcpu does not use are counted and skipped; compressed records (`perf record -z`) are decompressed
// (compressed.ts) and their records read as the others.
import { constants } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../../error.js';
import { ByteStream } from './byte-stream.js';
import { CompressedRecords, CompressedStreamError, zstdStartError } from './compressed.js';
import { decodeBuildIdRecord, decodeFeature, type Features } from './features.js';
import {
  attrMinBytes,
  badInput,
  decodeAttr,
  defaultEventName,
  feature,
  limits,
  recordType,
  sampleBit,
  type EventAttr,
} from './format.js';
import { TimeOrder } from './order.js';
import {
  CallchainSlab,
  decodeOther,
  decodeSample,
  RecordError,
  RecordLayout,
  type PerfEvent,
  type SampleEvent,
} from './records.js';

export type { PerfEvent } from './records.js';

export interface PerfDataHeader {
  mode: 'file' | 'pipe';
  attrs: EventAttr[];
  features: Features;
  /** What a file-mode perf.data's header says of the file (perf script --header prints it first). */
  file?: FileFacts;
}

export interface FileFacts {
  /** The file's mtime, ms since the epoch (perf's `captured on`). */
  mtimeMs: number;
  dataOffset: number;
  dataSize: number;
  /** The feature bits set in the header, in order. */
  featureBits: number[];
}

export interface ReadSummary {
  header: PerfDataHeader;
  /** Records read, by type number (128: every type above perf's). */
  recordCounts: Map<number, number>;
  samples: number;
  /** Samples whose id names no attribute (perf counts them as "unknown id" and drops them too). */
  unknownIdSamples: number;
  /** Build-ids given by HEADER_BUILD_ID records (pipe mode), also added to header.features.buildIds. */
  pipeBuildIds: number;
  /** Bytes the compressed records (perf record -z) held once decompressed; 0 without any. */
  decompressedBytes: number;
  /** Bytes of a record the compressed data ended inside of (a recording cut short), left unread as perf leaves them. */
  cutCompressedBytes: number;
}

export interface ReadHandlers {
  /** Called once before the first event, with the attributes and the features known then. */
  header?(header: PerfDataHeader): void | Promise<void>;
  /** Each event in perf script's order; a returned promise holds the reader back. */
  event(event: PerfEvent): void | Promise<void>;
}

export interface ReadOptions {
  signal?: AbortSignal | undefined;
  /** Name used in error messages. Default: the path. */
  name?: string;
  /** Bytes read at a time from a file. Default 1 MiB; tests read in small pieces to catch chunk-boundary bugs. */
  chunkBytes?: number;
  /** Time one compressed record may take to decode, ms. Default compressedLimits.decodeDeadlineMs. */
  decodeDeadlineMs?: number;
}

const fileHeaderBytes = 104;
/** Counter values kept to make the periods of PERF_SAMPLE_READ samples (one per event id, or id and thread). */
const maxReadCounters = 1 << 20;
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

/** Names each attribute from EVENT_DESC (by its ids, else by position) or perf's default names. */
function nameEvents(header: PerfDataHeader): void {
  const desc = header.features.eventDesc ?? [];
  header.attrs.forEach((attr, i) => {
    const byId = desc.find((d) => d.ids.some((id) => attr.ids.includes(id)));
    attr.name =
      byId?.name ?? (desc.length === header.attrs.length ? desc[i]!.name : undefined) ?? defaultEventName(attr);
  });
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

/** Walks the records from the stream's position up to `end`, delivering events in perf's order. */
async function deliverRecords(
  stream: ByteStream,
  header: PerfDataHeader,
  handlers: ReadHandlers,
  name: string,
  options: ReadOptions,
  end: number,
): Promise<ReadSummary> {
  const walk = new RecordWalk(stream, header, handlers, name, options);
  if (header.mode === 'file') await walk.started();
  try {
    await walk.readRecords(end);
    return await walk.finish();
  } finally {
    await walk.close();
  }
}

/** One walk over a recording's records: what its steps share, the layout once known, the queue, the counts. */
class RecordWalk {
  private readonly summary: ReadSummary;
  private compressed: CompressedRecords | undefined;
  private layout: RecordLayout | undefined;
  private readonly order: TimeOrder<PerfEvent>;
  private readonly slab = new CallchainSlab();
  /** The last value of each counter, by id (or id and thread) for PERF_SAMPLE_READ samples: see deliverReads. */
  private readonly lastValue = new Map<number | bigint | string, number | bigint>();
  // Counted in an array (types beyond perf's together at 128: a hostile stream cannot grow it), a map at the end.
  private readonly counts = new Array<number>(129).fill(0);

  constructor(
    private readonly stream: ByteStream,
    private readonly header: PerfDataHeader,
    private readonly handlers: ReadHandlers,
    private readonly name: string,
    private readonly options: ReadOptions,
  ) {
    this.summary = {
      header,
      recordCounts: new Map(),
      samples: 0,
      unknownIdSamples: 0,
      pipeBuildIds: 0,
      decompressedBytes: 0,
      cutCompressedBytes: 0,
    };
    // A queued sample's callchain and user stack keep their whole buffers alive (the chunk read, or a slab): the queue
    // counts their bytes too.
    this.order = new TimeOrder<PerfEvent>(
      (event) => (event.kind === 'sample' && event.reads ? this.deliverReads(event) : handlers.event(event)),
      undefined,
      (event) =>
        event.kind !== 'sample'
          ? undefined
          : event.userStack
            ? [event.callchain?.buffer, event.userStack.buffer]
            : event.callchain?.buffer,
    );
  }

  /** The attributes are all in: the events named, the layout made, the header handed over (once). */
  async started(): Promise<RecordLayout> {
    if (this.layout) return this.layout;
    if (this.header.attrs.length === 0) throw badInput(this.name, 'records before any event attribute');
    nameEvents(this.header);
    try {
      this.layout = new RecordLayout(this.header.attrs);
    } catch (error) {
      throw badInput(this.name, (error as Error).message, error);
    }
    await this.handlers.header?.(this.header);
    return this.layout;
  }

  /** Reads and handles each record from the stream's position up to `end` (a pipe's: the end of the stream). */
  async readRecords(end: number): Promise<void> {
    const { stream, name } = this;
    let count = 0;
    while (stream.position < end) {
      if ((++count & 0xfff) === 0) {
        // Buffered chunks and sync handlers never leave the microtask queue: let timers and signals run.
        await new Promise(setImmediate);
        if (this.options.signal?.aborted) throw new ProfcpuError('ABORTED', `reading ${name} was interrupted`);
      }
      const offset = stream.position;
      const record = this.bufferedRecord(offset, end) ?? (await this.readRecord(offset, end));
      if (!record) break;
      const type = record.readUInt32LE(0);
      this.counts[type < 128 ? type : 128]!++;
      try {
        const handled = this.handleRecord(record, type, offset);
        if (handled) await handled;
      } catch (error) {
        if (error instanceof RecordError) throw badInput(name, `${error.message} at offset ${offset}`, error);
        throw error;
      }
    }
  }

  /** A record within the chunk read is one view of it; undefined when it is not all there. */
  private bufferedRecord(offset: number, end: number): Buffer | undefined {
    const buffered = this.stream.peekUInt16LE(6);
    return buffered !== undefined && buffered >= 8 && offset + buffered <= end
      ? this.stream.tryRead(buffered)
      : undefined;
  }

  /** The record at `offset` read whole from the stream, checked against `end`; undefined where a pipe ends. */
  private async readRecord(offset: number, end: number): Promise<Buffer | undefined> {
    const { stream, name } = this;
    const head = stream.tryRead(8) ?? (await stream.read(8));
    if (head.length === 0 && end === Number.POSITIVE_INFINITY) return undefined;
    if (head.length < 8) throw badInput(name, `a record cut short at offset ${offset}`);
    const size = head.readUInt16LE(6);
    if (size < 8 || offset + size > end) throw badInput(name, `a record of ${size} bytes at offset ${offset}`);
    const record = await wholeRecord(stream, head, size);
    if (record.length < size) throw badInput(name, `a record cut short at offset ${offset}`);
    return record;
  }

  /** The queue delivered and the summary completed, once the records are read. */
  async finish(): Promise<ReadSummary> {
    const { summary } = this;
    // A recording cut short (perf killed, finished by recover.ts) may end inside a compressed record: perf leaves
    // what it holds of that record unread, and so does this.
    summary.cutCompressedBytes = this.compressed?.pending ?? 0;
    if (this.layout) await this.order.finish();
    else await this.started();
    this.counts.forEach((n, type) => n > 0 && summary.recordCounts.set(type, n));
    summary.decompressedBytes = this.compressed?.bytes ?? 0;
    return summary;
  }

  async close(): Promise<void> {
    await this.compressed?.close();
    await this.stream.close();
  }

  /** Samples once the layout is known, the bulk of the records, are handled without a promise unless one is needed. */
  private handleRecord(record: Buffer, type: number, offset: number): void | Promise<void> {
    const { layout, summary } = this;
    if (type !== recordType.sample || !layout) return this.handleAny(record, type, offset);
    const attr = layout.sampleAttr(record);
    if (attr < 0) {
      summary.unknownIdSamples++;
      return;
    }
    summary.samples++;
    const sample = decodeSample(record, attr, this.header.attrs[attr]!, this.slab);
    sample.offset = offset;
    return this.order.push(sample.time, sample);
  }

  private async handleAny(record: Buffer, type: number, offset: number): Promise<void> {
    const { header } = this;
    switch (type) {
      case recordType.sample:
        // The first sample of a pipe: the attributes are all in, the layout is made, then it goes as the others.
        await this.started();
        return this.handleRecord(record, type, offset);
      case recordType.finishedRound:
        if (this.layout) await this.order.round();
        return;
      case recordType.headerAttr:
        return this.addPipeAttr(record, offset);
      case recordType.headerFeature:
        return this.addPipeFeature(record, offset);
      case recordType.headerBuildId:
        if (record.length < 36) throw new RecordError('a build-id record too short');
        if (header.features.buildIds.length < limits.maxBuildIds)
          header.features.buildIds.push(decodeBuildIdRecord(record));
        this.summary.pipeBuildIds++;
        return;
      case recordType.headerTracingData: {
        // Its tracing data follows the record, padded to 8 bytes.
        if (record.length < 12) throw new RecordError('a tracing-data record too short');
        const bytes = record.readUInt32LE(8);
        if (!(await this.stream.skip(Math.ceil(bytes / 8) * 8))) throw new RecordError('tracing data cut short');
        return;
      }
      case recordType.auxtrace: {
        if (record.length < 16) throw new RecordError('an auxtrace record too short');
        const bytes = safe(record.readBigUInt64LE(8));
        if (!Number.isFinite(bytes) || !(await this.stream.skip(bytes)))
          throw new RecordError('auxtrace data cut short');
        return;
      }
      case recordType.compressed:
      case recordType.compressed2:
        return this.decompressed(record, type, offset);
      default: {
        if (type >= 64) return;
        const l = await this.started();
        const event = decodeOther(record, type, l.otherTime(record));
        if (!event) return;
        event.offset = offset;
        return this.order.push(event.time, event);
      }
    }
  }

  /** The records a COMPRESSED record holds, each handled as if it stood in its place. */
  private async decompressed(record: Buffer, type: number, offset: number): Promise<void> {
    const payload = compressedPayload(record, type);
    this.compressed ??= new CompressedRecords(this.options.decodeDeadlineMs, this.options.signal);
    let records: Buffer[];
    try {
      records = await this.compressed.take(payload);
    } catch (error) {
      if (!(error instanceof CompressedStreamError)) throw error;
      if (error.tooLargeWindow) throw windowTooLarge(this.name, error);
      throw new RecordError(`compressed data (perf record -z) with ${error.message}`);
    }
    for (const inner of records) {
      const innerType = inner.readUInt32LE(0);
      // Records whose data follows them in the file (tracing data, AUX trace) cannot lie inside compressed data.
      if (
        innerType === recordType.compressed ||
        innerType === recordType.compressed2 ||
        innerType === recordType.headerTracingData ||
        innerType === recordType.auxtrace
      )
        throw new RecordError(`a record of type ${innerType} inside compressed data`);
      this.counts[innerType < 128 ? innerType : 128]!++;
      const handled = this.handleRecord(inner, innerType, offset);
      if (handled) await handled;
    }
  }

  private addPipeAttr(record: Buffer, offset: number): void {
    const { header } = this;
    if (this.layout) throw badInput(this.name, `an event attribute after the data began, at offset ${offset}`);
    if (record.length < 8 + attrMinBytes) throw new RecordError('an attribute record too short');
    const attrBytes = record.readUInt32LE(12);
    if (attrBytes < attrMinBytes || 8 + attrBytes > record.length)
      throw new RecordError(`an attribute of ${attrBytes} bytes`);
    if (header.attrs.length >= limits.maxAttrs) throw new RecordError(`more than ${limits.maxAttrs} attributes`);
    const ids: bigint[] = [];
    for (let at = 8 + attrBytes; at + 8 <= record.length; at += 8) ids.push(record.readBigUInt64LE(at));
    header.attrs.push({ ...decodeAttr(record, 8, attrBytes), ids, name: undefined });
  }

  private addPipeFeature(record: Buffer, offset: number): void {
    if (record.length < 16) throw new RecordError('a feature record too short');
    const bit = safe(record.readBigUInt64LE(8));
    try {
      decodeFeature(bit, record.subarray(16), this.header.features);
    } catch (error) {
      throw badInput(this.name, `feature ${bit} at offset ${offset}: ${(error as Error).message}`, error);
    }
  }

  // A PERF_SAMPLE_READ sample is, to perf script, one sample per value it holds, of that value's event, its period
  // what the counter grew by since the last one of the same id; none when it did not grow (session.c's
  // deliver_sample_value), made when delivered, in perf's order. For an inherited event that samples its tid (perf 7
  // records leader sampling so; earlier perfs turned inherit off) the last value is kept per id and thread
  // (perf_sample_id__get_period_storage), as each thread's counter counts on its own. At most maxReadCounters are
  // kept: past them (a file no perf wrote) they start afresh.
  private deliverReads(sample: SampleEvent): void | Promise<void> {
    const { lastValue, summary, handlers } = this;
    const layout = this.layout!;
    const reads = sample.reads!;
    const own = this.header.attrs[sample.attr]!;
    const perThread = own.inherit && (own.sampleType & sampleBit.tid) !== 0n;
    if (lastValue.size >= maxReadCounters) lastValue.clear();
    const next = (i: number): void | Promise<void> => {
      for (; i < reads.length; i++) {
        const { id, value } = reads[i]!;
        const attr = layout.byId.get(id);
        if (attr === undefined) {
          summary.unknownIdSamples++;
          continue;
        }
        const key = perThread ? `${id}/${sample.tid}` : id;
        const previous = lastValue.get(key);
        lastValue.set(key, value);
        // perf subtracts u64s: a counter that went back (a file no kernel wrote) wraps round.
        const period =
          typeof value === 'number' && typeof previous !== 'bigint' && value >= (previous ?? 0)
            ? value - (previous ?? 0)
            : BigInt.asUintN(64, BigInt(value) - BigInt(previous ?? 0));
        if (period === 0 || period === 0n) continue;
        const delivered = handlers.event({ ...sample, attr, period, reads: undefined });
        if (delivered) return delivered.then(() => next(i + 1));
      }
    };
    return next(0);
  }
}

/** The zstd data of a COMPRESSED record, or of perf 7's COMPRESSED2 (its size, then the data, padded to 8 bytes). */
function compressedPayload(record: Buffer, type: number): Buffer {
  if (type !== recordType.compressed2) return record.subarray(8);
  if (record.length < 16) throw new RecordError('a compressed record too short');
  const size = safe(record.readBigUInt64LE(8));
  if (size > record.length - 16) throw new RecordError('a compressed record shorter than its data');
  return record.subarray(16, 16 + size);
}

/** A recording compressed with a larger zstd window than profcpu decodes: perf can read it. */
export function windowTooLarge(name: string, cause: CompressedStreamError): ProfcpuError {
  return new ProfcpuError(
    'NEEDS_PERF',
    `${name} was recorded with perf record -z at a zstd level above 7 (${cause.message}), which the built-in ` +
      'engine does not decompress',
    {
      remedy:
        'Post-process it with `--engine perf` where perf is installed, or record again with a lower level (`-z` ' +
        'alone is level 1).',
      cause,
    },
  );
}

async function wholeRecord(stream: ByteStream, head: Buffer, size: number): Promise<Buffer> {
  if (size === 8) return Buffer.from(head);
  const body = stream.tryRead(size - 8);
  // The head is a view into the chunk just before the body when both came from it: one slice holds the record.
  if (body && body.buffer === head.buffer && body.byteOffset === head.byteOffset + 8)
    return Buffer.from(body.buffer, head.byteOffset, size);
  const rest = body ?? (await stream.read(size - 8));
  return Buffer.concat([head, rest]);
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

/** A u64 as a number; past 2^53 it is Infinity, which every bound refuses. */
function safe(value: bigint): number {
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(value);
}

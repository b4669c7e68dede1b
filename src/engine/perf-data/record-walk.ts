// One walk over a perf.data's records, for reader.ts: takes the byte stream positioned at the first record, the
// header known so far and the caller's handlers; decodes each record (records.ts), decompresses `perf record -z`
// payloads (compressed.ts), names the events once their descriptions are known, queues events in perf script's
// order (order.ts) and delivers them, counting what it read and what it skipped. Also the reader's public types.

import { ProfcpuError } from '../../error.js';
import { ByteStream } from './byte-stream.js';
import { CompressedRecords, CompressedStreamError } from './compressed.js';
import { decodeBuildIdRecord, decodeFeature, type Features } from './features.js';
import {
  attrMinBytes,
  badInput,
  decodeAttr,
  defaultEventName,
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

/** Counter values kept to make the periods of PERF_SAMPLE_READ samples (one per event id, or id and thread). */
const maxReadCounters = 1 << 20;

/** Names each attribute from EVENT_DESC (by its ids, else by position) or perf's default names. */
export function nameEvents(header: PerfDataHeader): void {
  const desc = header.features.eventDesc ?? [];
  header.attrs.forEach((attr, i) => {
    const byId = desc.find((d) => d.ids.some((id) => attr.ids.includes(id)));
    attr.name =
      byId?.name ?? (desc.length === header.attrs.length ? desc[i]!.name : undefined) ?? defaultEventName(attr);
  });
}

/** Walks the records from the stream's position up to `end`, delivering events in perf's order. */
export async function deliverRecords(
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
  /** The file offset up to which the records were looked over for compressed ones to decode ahead (aheadOf). */
  private scanned = 0;
  /** Where the records being read end. */
  private end = 0;
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
    this.end = end;
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
        const event = decodeOther(record, type, l.otherTime(record), () => l.otherTask(record));
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
      const taken = this.compressed.take(payload, offset);
      this.aheadOf(this.compressed);
      records = await taken;
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

  /**
   * Gives the decoder the compressed records that follow in the chunk read (the next ones in file order, up to its
   * room), to be decoded while this one's records are handled. Only records whole in the chunk are looked at, up to
   * the end of the records; anything odd ends the look, and the walk reads it in its turn.
   */
  private aheadOf(compressed: CompressedRecords): void {
    const { stream } = this;
    let at = Math.max(stream.position, this.scanned);
    while (compressed.room > 0 && at + 8 <= this.end) {
      const size = stream.peekUInt16LE(at - stream.position + 6) ?? 0;
      const record = size >= 8 && at + size <= this.end ? stream.peek(at - stream.position, size) : undefined;
      if (!record) break;
      const type = record.readUInt32LE(0);
      if (type === recordType.compressed || type === recordType.compressed2) {
        let payload: Uint8Array;
        try {
          payload = compressedPayload(record, type);
        } catch {
          break;
        }
        compressed.ahead(payload, at);
      } else if (type === recordType.headerTracingData || type === recordType.auxtrace) break;
      at += size;
      this.scanned = at;
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
export function compressedPayload(record: Buffer, type: number): Buffer {
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

/** A u64 as a number; past 2^53 it is Infinity, which every bound refuses. */
export function safe(value: bigint): number {
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.POSITIVE_INFINITY : Number(value);
}

// The records `perf record -z` wrote compressed: takes the payload of each COMPRESSED record (type 81; perf 7 writes
// COMPRESSED2, type 83, with its payload's size and padding to 8 bytes) in file order, gives the records they hold.
// perf compresses the whole recording as one zstd stream, flushed at the end of each record (tools/perf/util/zstd.c):
// a record's payload is whole zstd blocks, whose matches may reach back into earlier records' data, and the records it
// decompresses to may be cut at its end and go on in the next one's (session.c keeps the rest, decomp_last_rem). The
// zstd decoding is fzstd's (pure JS: Node 20 has no zstd).
//
// The file may come from anybody, and fzstd trusts the stream: it allocates the window a frame header asks for (up to
// 2 GiB) and moves that whole window for every block it decodes. So the stream's framing is walked here first, a few
// bytes per block and no decoding: a frame whose window exceeds `maxWindowBytes` (perf's default level 1 uses
// 512 KiB; levels up to 7, 2 MiB), a dictionary, a skippable frame or a reserved block type is refused before fzstd
// sees it. Blocks go to fzstd one at a time, and the stream is refused once it holds more blocks than perf makes (a
// flush ends one per record, the compressor one per 128 KiB: 64 + 2 per record + 1 per 32 KiB decompressed are
// allowed) or decompresses more than perf's data does (a bomb): at worst one window move (20 µs at 2 MiB) per 8 bytes
// of forged records, about 3 s per MB. The work inside one block fzstd does not bound (it runs each sequence to its
// end, past its buffer: 12 forged bytes took 77 s), so it decodes on a worker thread (zstd-decoder.ts,
// decompress-worker.ts), one record at a time, each within `decodeDeadlineMs`: a record that takes longer ends the
// read as damaged, and Ctrl-C stops it at once. This module itself never runs fzstd.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ProfcpuError } from '../../error.js';

export const compressedLimits = Object.freeze({
  /** Largest window accepted: zstd levels 1 to 7 (perf record -z's default is 1, with 512 KiB). */
  maxWindowBytes: 2 << 20,
  /** Bytes one record may decompress to (perf's bound is its ring buffer's size, -m: 516 KiB by default). */
  maxRecordBytes: 64 << 20,
  /**
   * Bytes decompressed at most, in all: `baseBytes` plus `maxRatio` times the compressed bytes read (perf's data
   * compresses 10 to 30 times at level 1; an RLE block makes 128 KiB of 4 bytes).
   */
  baseBytes: 64 << 20,
  maxRatio: 1000,
  /**
   * Time one record's payload may take to decode (on the worker: see CompressedRecords). perf's records, at most
   * 64 KiB compressed and 64 MiB decompressed, take well under a second.
   */
  decodeDeadlineMs: 10_000,
});

/** The stream is not one perf record -z writes, or is beyond the limits above. */
export class CompressedStreamError extends Error {
  constructor(
    message: string,
    /** The frame's window is larger than profcpu decodes (a zstd level above 7): perf can read it. */
    readonly tooLargeWindow = false,
  ) {
    super(message);
  }
}

const zstdMagic = 0xfd2fb528;
const maxBlockBytes = 128 << 10;

/** Walks zstd frames and blocks over bytes given in pieces: checks them, decodes nothing. */
export class ZstdFraming {
  private state: 'frame' | 'blockHeader' | 'blockBody' | 'checksum' = 'frame';
  /** Bytes of a frame or block header gathered so far. */
  private head: number[] = [];
  /** Bytes left in the current block's body or checksum. */
  private left = 0;
  private window = 0;
  private checksum = false;
  private last = false;

  /** Walks `bytes`; gives the offset in them just past each block that ends there. */
  walk(bytes: Uint8Array): number[] {
    const ends: number[] = [];
    let at = 0;
    while (at < bytes.length) {
      if (this.state === 'blockBody' || this.state === 'checksum') {
        const take = Math.min(this.left, bytes.length - at);
        at += take;
        this.left -= take;
        if (this.left > 0) continue;
        if (this.state === 'blockBody') {
          ends.push(at);
          this.endBlock();
        } else this.state = 'frame';
        continue;
      }
      this.head.push(bytes[at++]!);
      if (this.state === 'frame') this.frameHeader();
      else if (this.head.length === 3 && this.blockHeader()) ends.push(at);
    }
    return ends;
  }

  private endBlock(): void {
    this.state = this.last ? (this.checksum ? 'checksum' : 'frame') : 'blockHeader';
    if (this.state === 'checksum') this.left = 4;
  }

  /** Called at each byte of a frame header until it is whole. */
  private frameHeader(): void {
    const h = this.head;
    if (h.length === 4 && (h[0]! | (h[1]! << 8) | (h[2]! << 16) | (h[3]! << 24)) >>> 0 !== zstdMagic)
      throw new CompressedStreamError('no zstd frame where one should start');
    if (h.length < 5) return;
    const descriptor = h[4]!;
    if (descriptor & 0x08) throw new CompressedStreamError('a zstd frame header with its reserved bit set');
    const singleSegment = (descriptor >> 5) & 1;
    const dictionaryBytes = [0, 1, 2, 4][descriptor & 3]!;
    const contentSizeFlag = descriptor >> 6;
    const contentSizeBytes = contentSizeFlag === 0 ? singleSegment : 1 << contentSizeFlag;
    const length = 5 + (singleSegment ? 0 : 1) + dictionaryBytes + contentSizeBytes;
    if (h.length < length) return;
    let at = 5;
    if (!singleSegment) {
      // 2 ** keeps the arithmetic exact for exponents past 31 (windows no perf writes, refused below).
      const base = 2 ** ((h[at]! >> 3) + 10);
      this.window = base + (base / 8) * (h[at]! & 7);
      at++;
    }
    const number = (from: number, bytes: number) => {
      let value = 0;
      for (let i = 0; i < bytes; i++) value += h[from + i]! * 2 ** (8 * i);
      return value;
    };
    if (number(at, dictionaryBytes) !== 0) throw new CompressedStreamError('a zstd frame that needs a dictionary');
    at += dictionaryBytes;
    // A single-segment frame's window is its content's size.
    if (singleSegment) this.window = number(at, contentSizeBytes) + (contentSizeBytes === 2 ? 256 : 0);
    if (this.window > compressedLimits.maxWindowBytes)
      throw new CompressedStreamError(
        `a zstd window of ${this.window} bytes (profcpu decodes up to ${compressedLimits.maxWindowBytes}: ` +
          'perf record -z levels 1 to 7)',
        true,
      );
    this.checksum = (descriptor & 0x04) !== 0;
    this.head = [];
    this.state = 'blockHeader';
  }

  /** Reads a whole block header; true when the block has no body (a raw block of 0 bytes) and so ends here. */
  private blockHeader(): boolean {
    const [b0, b1, b2] = this.head as [number, number, number];
    this.head = [];
    const header = b0 | (b1 << 8) | (b2 << 16);
    this.last = (header & 1) === 1;
    const type = (header >> 1) & 3;
    const size = header >>> 3;
    if (type === 3) throw new CompressedStreamError('a zstd block of the reserved type');
    if (size > Math.min(this.window, maxBlockBytes)) throw new CompressedStreamError(`a zstd block of ${size} bytes`);
    // An RLE block repeats one byte `size` times; a raw or compressed block's body is `size` bytes.
    this.left = type === 1 ? 1 : size;
    this.state = 'blockBody';
    if (this.left > 0) return false;
    this.endBlock();
    return true;
  }
}

/**
 * The first frame header of a recording's zstd stream checked, decoding nothing: the error a stream starting so
 * would end in (a window larger than profcpu decodes, no zstd frame), or undefined. For the engine choice.
 */
export function zstdStartError(payload: Uint8Array): CompressedStreamError | undefined {
  try {
    new ZstdFraming().walk(payload);
    return undefined;
  } catch (error) {
    if (error instanceof CompressedStreamError) return error;
    throw error;
  }
}

/**
 * The worker: the built module beside this one (dist/), or, where this module runs from its source (the tests, under
 * tsx, whose loader a worker does not inherit), the source through tsx's loader.
 */
function startWorker(): Worker {
  const built = new URL('./decompress-worker.js', import.meta.url);
  if (existsSync(fileURLToPath(built))) return new Worker(built);
  const source = new URL('./decompress-worker.ts', import.meta.url).href;
  const load = `import('tsx/esm/api').then((tsx) => tsx.register()).then(() => import(${JSON.stringify(source)}))`;
  return new Worker(load, { eval: true });
}

/** The worker's answer to one payload. */
export type DecodeReply =
  { bytes: ArrayBuffer; byteOffset: number; length: number } | { error: string; tooLargeWindow: boolean };

/**
 * Payloads handed to the worker ahead of the one being read, at most: it decodes the next ones while the reader
 * handles the records of this one (given one at a time, the two threads took turns: postprocess of a 28 MB off-CPU
 * recording, 1.1 GB decompressed, took 14.4 s, and 11.3 s decoding ahead). Each decodes to 64 MiB at most
 * (maxRecordBytes), so a forged recording holds 4 of them at once at worst; perf's decode to 516 KiB each.
 */
export const decodeAhead = 3;

/** A payload given to the worker, its decoded bytes to come. */
interface Decoding {
  offset: number;
  reply: Promise<Buffer>;
  settle: (error: Error | undefined, bytes?: Buffer) => void;
}

/**
 * The records of a compressed recording, payload by payload: give it each COMPRESSED record's payload in file order,
 * take the whole records it completes (views of one buffer, to be handled before the next call). The decoding runs on
 * a worker thread (decompress-worker.ts), in order, each payload within `deadlineMs` of the worker's turning to it:
 * fzstd runs each sequence of a block to its end whatever the block's size, so a forged block of a few bytes can take
 * minutes, which a worker can be stopped from doing (a read on the main thread could not). The reader may give the
 * next payloads ahead (`ahead`, up to decodeAhead), to be decoded while it handles this one's records. Call close()
 * when done.
 */
export class CompressedRecords {
  private worker: Worker | undefined;
  /** The start of a record the previous payload cut. */
  private rest: Buffer = Buffer.alloc(0);
  /** Payloads given to the worker and not yet taken, in file order; the first ones may be decoded. */
  private readonly decoding: Decoding[] = [];
  /** Payloads the worker has not answered yet, in the order given (which its answers come in). */
  private readonly unanswered: Decoding[] = [];
  private timer: NodeJS.Timeout | undefined;
  /** Why the worker decodes no more (an error, Ctrl-C, close()): every payload given after fails so. */
  private failure: Error | undefined;
  private readonly onAbort = () => this.fail(new ProfcpuError('ABORTED', 'reading compressed records was interrupted'));
  /** Bytes decompressed, in all. */
  bytes = 0;

  constructor(
    private readonly deadlineMs: number = compressedLimits.decodeDeadlineMs,
    private readonly signal?: AbortSignal,
  ) {}

  /** The whole records that `payload` (the COMPRESSED record's at `offset`) completes, each a view of its bytes. */
  async take(payload: Uint8Array, offset: number): Promise<Buffer[]> {
    const next = this.decoding[0]?.offset === offset ? this.decoding[0] : undefined;
    if (!next && this.decoding.length > 0)
      throw new Error(`compressed record at ${offset} taken out of order (${this.decoding[0]!.offset} given ahead)`);
    const decoding = next ?? this.give(payload, offset);
    this.decoding.shift();
    const decoded = await decoding.reply;
    this.bytes += decoded.length;
    const data = this.rest.length === 0 ? decoded : Buffer.concat([this.rest, decoded]);
    const records: Buffer[] = [];
    let at = 0;
    while (at + 8 <= data.length) {
      const size = data.readUInt16LE(at + 6);
      if (size < 8) throw new CompressedStreamError(`a decompressed record of ${size} bytes`);
      if (at + size > data.length) break;
      records.push(data.subarray(at, at + size));
      at += size;
    }
    this.rest = data.subarray(at);
    return records;
  }

  /** How many more payloads the reader may give ahead of the one it takes next. */
  get room(): number {
    return this.failure ? 0 : Math.max(0, decodeAhead - this.decoding.length);
  }

  /**
   * Gives the worker the payload of the COMPRESSED record at `offset`, to decode while the reader handles earlier
   * ones: the next one after those given, in file order (take() then takes it in its turn).
   */
  ahead(payload: Uint8Array, offset: number): void {
    if (this.room > 0) this.give(payload, offset);
  }

  /** Bytes of a record cut short at the end of the last payload (0 when every record was whole). */
  get pending(): number {
    return this.rest.length;
  }

  async close(): Promise<void> {
    this.fail(new CompressedStreamError('reading compressed records ended'));
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private give(payload: Uint8Array, offset: number): Decoding {
    let settle!: Decoding['settle'];
    const reply = new Promise<Buffer>((resolve, reject) => {
      settle = (error, bytes) => (error ? reject(error) : resolve(bytes!));
    });
    // A payload given ahead may fail before the reader takes it: it is seen then, not as an unhandled rejection.
    reply.catch(() => {});
    const decoding: Decoding = { offset, reply, settle };
    this.decoding.push(decoding);
    if (this.failure) {
      settle(this.failure);
      return decoding;
    }
    const worker = this.started();
    this.unanswered.push(decoding);
    if (this.unanswered.length === 1) this.startClock();
    // A copy of its own to hand over (the payload is a view of the chunk read, which other records share).
    const copy = new Uint8Array(payload);
    worker.postMessage(copy, [copy.buffer]);
    return decoding;
  }

  private started(): Worker {
    if (this.worker) return this.worker;
    const worker = startWorker();
    worker.on('message', (reply: DecodeReply) => {
      if (this.failure) return;
      if ('error' in reply) return this.fail(new CompressedStreamError(reply.error, reply.tooLargeWindow));
      clearTimeout(this.timer);
      this.unanswered.shift()?.settle(undefined, Buffer.from(reply.bytes, reply.byteOffset, reply.length));
      if (this.unanswered.length > 0) this.startClock();
    });
    worker.on('error', (error: Error) =>
      this.fail(new CompressedStreamError(`zstd data the decoder failed on (${error.message})`)),
    );
    this.signal?.addEventListener('abort', this.onAbort, { once: true });
    if (this.signal?.aborted) this.onAbort();
    return (this.worker = worker);
  }

  /** The payload the worker turns to now must be decoded within the deadline. */
  private startClock(): void {
    this.timer = setTimeout(
      () =>
        this.fail(new CompressedStreamError(`zstd data that takes over ${this.deadlineMs} ms to decode one record`)),
      this.deadlineMs,
    );
  }

  /**
   * The worker decodes no more (the stream's state went with it): each payload not answered fails with `error`, and
   * so does each one given after.
   */
  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    clearTimeout(this.timer);
    this.signal?.removeEventListener('abort', this.onAbort);
    for (const decoding of this.unanswered.splice(0)) decoding.settle(error);
    const worker = this.worker;
    this.worker = undefined;
    void worker?.terminate();
  }
}

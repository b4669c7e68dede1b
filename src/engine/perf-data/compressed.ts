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
 * The records of a compressed recording, payload by payload: give it each COMPRESSED record's payload in file order,
 * take the whole records it completes (views of one buffer, to be handled before the next call). The decoding runs on
 * a worker thread (decompress-worker.ts), one payload at a time, each within `deadlineMs`: fzstd runs each sequence of
 * a block to its end whatever the block's size, so a forged block of a few bytes can take minutes, which a worker can
 * be stopped from doing (a read on the main thread could not). Call close() when done.
 */
export class CompressedRecords {
  private worker: Worker | undefined;
  /** The start of a record the previous payload cut. */
  private rest: Buffer = Buffer.alloc(0);
  /** Bytes decompressed, in all. */
  bytes = 0;

  constructor(
    private readonly deadlineMs: number = compressedLimits.decodeDeadlineMs,
    private readonly signal?: AbortSignal,
  ) {}

  /** The whole records that `payload` completes, each a view of its `size` bytes (from its header). */
  async take(payload: Uint8Array): Promise<Buffer[]> {
    const decoded = await this.decode(payload);
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

  /** Bytes of a record cut short at the end of the last payload (0 when every record was whole). */
  get pending(): number {
    return this.rest.length;
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private decode(payload: Uint8Array): Promise<Buffer> {
    const worker = (this.worker ??= startWorker());
    // A worker that failed or was stopped decodes no more: the stream's state went with it.
    return new Promise<Buffer>((resolve, reject) => {
      const done = (error: Error | undefined, bytes?: Buffer) => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        this.signal?.removeEventListener('abort', onAbort);
        if (error) {
          void this.close();
          reject(error);
        } else resolve(bytes!);
      };
      const onMessage = (reply: DecodeReply) => {
        if ('error' in reply) done(new CompressedStreamError(reply.error, reply.tooLargeWindow));
        else done(undefined, Buffer.from(reply.bytes, reply.byteOffset, reply.length));
      };
      const onError = (error: Error) =>
        done(new CompressedStreamError(`zstd data the decoder failed on (${error.message})`));
      const onAbort = () => done(new ProfcpuError('ABORTED', 'reading compressed records was interrupted'));
      const timer = setTimeout(
        () => done(new CompressedStreamError(`zstd data that takes over ${this.deadlineMs} ms to decode one record`)),
        this.deadlineMs,
      );
      worker.on('message', onMessage);
      worker.on('error', onError);
      if (this.signal?.aborted) return onAbort();
      this.signal?.addEventListener('abort', onAbort, { once: true });
      // A copy of its own to hand over (the payload is a view of the chunk read, which other records share).
      const copy = new Uint8Array(payload);
      worker.postMessage(copy, [copy.buffer]);
    });
  }
}

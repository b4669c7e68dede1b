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
// allowed) or decompresses more than perf's data does (a bomb). The cost is then linear in the file: at worst one
// window move (20 µs at 2 MiB) per 8 bytes of forged records, about 3 s per MB.
import { Decompress } from 'fzstd';

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
class ZstdFraming {
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
 * The records of a compressed recording, payload by payload: give it each COMPRESSED record's payload in file order,
 * take the whole records it completes (views of one buffer, to be handled before the next call).
 */
export class CompressedRecords {
  private readonly framing = new ZstdFraming();
  private readonly decoder: Decompress;
  private out: Uint8Array[] = [];
  /** The start of a record the previous payload cut. */
  private rest: Buffer = Buffer.alloc(0);
  /** Bytes of payload given, bytes decompressed, blocks decoded and payloads given, in all. */
  private compressedBytes = 0;
  bytes = 0;
  private blocks = 0;
  private payloads = 0;

  constructor() {
    this.decoder = new Decompress((chunk) => {
      this.bytes += chunk.length;
      // fzstd gives each block's bytes in an array of their own, which it does not touch again.
      this.out.push(chunk);
    });
  }

  /** The whole records that `payload` completes, each a view of its `size` bytes (from its header). */
  take(payload: Uint8Array): Buffer[] {
    this.payloads++;
    this.compressedBytes += payload.length;
    const before = this.bytes;
    let from = 0;
    // Block by block, each bound checked before the next block's cost (fzstd moves its whole window per block).
    for (const end of this.framing.walk(payload)) {
      this.push(payload.subarray(from, end));
      from = end;
      if (++this.blocks > 64 + 2 * this.payloads + this.bytes / 32768)
        throw new CompressedStreamError('more zstd blocks than perf record -z makes for the data they hold');
      if (this.bytes > compressedLimits.baseBytes + compressedLimits.maxRatio * this.compressedBytes)
        throw new CompressedStreamError(
          `data that decompresses more than ${compressedLimits.maxRatio} times (a decompression bomb)`,
        );
      if (this.bytes - before > compressedLimits.maxRecordBytes)
        throw new CompressedStreamError(
          `a compressed record holding more than ${compressedLimits.maxRecordBytes} bytes`,
        );
    }
    // A frame or block header cut at the payload's end: fzstd keeps it for the next.
    if (from < payload.length) this.push(payload.subarray(from));
    const data = Buffer.concat([this.rest, ...this.out]);
    this.out = [];
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

  private push(bytes: Uint8Array): void {
    try {
      this.decoder.push(bytes);
    } catch (error) {
      throw new CompressedStreamError(`zstd data that cannot be decoded (${(error as Error).message})`);
    }
  }
}

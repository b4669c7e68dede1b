// The decoding half of compressed.ts, which runs on its worker (decompress-worker.ts): a recording's zstd stream
// decoded by fzstd, payload by payload, block by block, within the bounds compressed.ts sets (its first lines say
// why and which).
import { Decompress } from 'fzstd';
import { compressedLimits, CompressedStreamError, ZstdFraming } from './compressed.js';

/**
 * The zstd stream of a recording, payload by payload (synchronous: it runs on the worker, decompress-worker.ts): give
 * it each COMPRESSED record's payload in file order, take the bytes it decompresses to.
 */
export class ZstdStreamDecoder {
  private readonly framing = new ZstdFraming();
  private readonly decoder: Decompress;
  private out: Uint8Array[] = [];
  /** Bytes of payload given, bytes decompressed, blocks decoded and payloads given, in all. */
  private compressedBytes = 0;
  private bytes = 0;
  private blocks = 0;
  private payloads = 0;

  constructor() {
    this.decoder = new Decompress((chunk) => {
      this.bytes += chunk.length;
      // fzstd gives each block's bytes in an array of their own, which it does not touch again.
      this.out.push(chunk);
    });
  }

  /** The bytes `payload` decompresses to, in one buffer of their own. */
  decode(payload: Uint8Array): Uint8Array {
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
    const out = Buffer.concat(this.out);
    this.out = [];
    return new Uint8Array(out.buffer, out.byteOffset, out.length);
  }

  private push(bytes: Uint8Array): void {
    try {
      this.decoder.push(bytes);
    } catch (error) {
      throw new CompressedStreamError(`zstd data that cannot be decoded (${(error as Error).message})`);
    }
  }
}

// A bound on line length for streamed text whose content the target decides (perf script prints the names in its
// perf map, one per frame per sample: an 8 MB method name would be 8 MB per sample). Takes chunks of text, gives the
// same chunks, except that a line longer than `maxLineBytes` keeps its first `maxLineBytes` bytes, then a marker,
// then its last `tailBytes` bytes, so a frame line still ends with its ` (dso)`. Streaming, with state across
// chunks; chunks without an overlong line are passed through as they are, uncopied.

/** What stands where a line was cut. */
export const cutMarker = Buffer.from('...[cut]...');

export const lineCutDefaults = Object.freeze({
  /** Far above any real perf script line (a .NET generic method name with its arguments is a few KB at most). */
  maxLineBytes: 16 << 10,
  /** Enough for `+0x1f3 (/path/to/the/library.so)` at the end of a frame line. */
  tailBytes: 512,
});

export class LongLineCutter {
  /** Lines cut so far. */
  linesCut = 0;
  /** Bytes of the current, unfinished line seen so far. */
  private lineBytes = 0;
  /** While in an overlong line: its last bytes so far. */
  private tail: Buffer | undefined;

  constructor(
    private readonly maxLineBytes: number = lineCutDefaults.maxLineBytes,
    private readonly tailBytes: number = lineCutDefaults.tailBytes,
  ) {}

  /** The chunk as it should be passed on. */
  cut(chunk: Buffer): Buffer {
    let pieces: Buffer[] | undefined;
    // Bytes from `start` on are still to be passed on (those before were passed or swallowed).
    let start = 0;
    let position = 0;
    while (position < chunk.length) {
      const newline = chunk.indexOf(10, position);
      const end = newline === -1 ? chunk.length : newline;
      const length = end - position;
      if (this.tail === undefined && this.lineBytes + length > this.maxLineBytes) {
        // The line turns overlong here: pass on its head, keep only its tail from now on.
        const keep = this.maxLineBytes - this.lineBytes;
        (pieces ??= []).push(chunk.subarray(start, position + keep));
        this.tail = Buffer.alloc(0);
        this.keepTail(chunk.subarray(position + keep, end));
        start = end;
      } else if (this.tail !== undefined) {
        pieces ??= [];
        this.keepTail(chunk.subarray(position, end));
        start = end;
      }
      this.lineBytes += length;
      if (newline === -1) break;
      if (this.tail !== undefined) {
        (pieces ??= []).push(cutMarker, this.tail);
        this.tail = undefined;
        this.linesCut++;
        start = newline;
      }
      this.lineBytes = 0;
      position = newline + 1;
    }
    if (pieces === undefined) return chunk;
    if (start < chunk.length) pieces.push(chunk.subarray(start));
    return Buffer.concat(pieces);
  }

  /** What is left at the end of the text: the marker and tail of an overlong last line without its newline. */
  end(): Buffer {
    if (this.tail === undefined) return Buffer.alloc(0);
    const rest = Buffer.concat([cutMarker, this.tail]);
    this.tail = undefined;
    this.linesCut++;
    return rest;
  }

  private keepTail(bytes: Buffer): void {
    if (bytes.length >= this.tailBytes) {
      this.tail = Buffer.from(bytes.subarray(bytes.length - this.tailBytes));
      return;
    }
    const joined = Buffer.concat([this.tail ?? Buffer.alloc(0), bytes]);
    this.tail = joined.length > this.tailBytes ? joined.subarray(joined.length - this.tailBytes) : joined;
  }
}

// Exact-length reads over a stream of chunks (a file's data section read in 1 MiB pieces, or perf record's pipe):
// takes an async iterable of Buffers, gives slices of the asked length. A slice within one chunk is a view, not a
// copy; one that spans chunks is copied into a buffer of its own size, which the caller bounds (a perf record is at
// most 64 KiB). Nothing is buffered beyond the chunk being read.

export class ByteStream {
  private chunk: Buffer = Buffer.alloc(0);
  private at = 0;
  private readonly iterator: AsyncIterator<Buffer>;
  private ended = false;
  /** Bytes consumed since the start of the stream, plus the offset it started at. */
  position: number;

  constructor(chunks: AsyncIterable<Buffer>, startOffset = 0) {
    this.iterator = chunks[Symbol.asyncIterator]();
    this.position = startOffset;
  }

  /** `length` bytes when they are already buffered, else undefined (then call read). */
  tryRead(length: number): Buffer | undefined {
    if (this.chunk.length - this.at < length) return undefined;
    const slice = this.chunk.subarray(this.at, this.at + length);
    this.at += length;
    this.position += length;
    return slice;
  }

  /** The u16 (little-endian) `offset` bytes ahead when it is already buffered, else undefined. */
  peekUInt16LE(offset: number): number | undefined {
    const at = this.at + offset;
    return at + 2 <= this.chunk.length ? this.chunk.readUInt16LE(at) : undefined;
  }

  /** A view of the `length` bytes `offset` bytes ahead when they are already buffered (nothing read), else undefined. */
  peek(offset: number, length: number): Buffer | undefined {
    const at = this.at + offset;
    return at + length <= this.chunk.length ? this.chunk.subarray(at, at + length) : undefined;
  }

  /** `length` bytes, or fewer when the stream ends first (the caller says what a short read means). */
  async read(length: number): Promise<Buffer> {
    const fast = this.tryRead(length);
    if (fast) return fast;
    const out = Buffer.allocUnsafe(length);
    let filled = 0;
    for (;;) {
      const take = Math.min(length - filled, this.chunk.length - this.at);
      this.chunk.copy(out, filled, this.at, this.at + take);
      this.at += take;
      filled += take;
      this.position += take;
      if (filled === length || !(await this.pull())) return out.subarray(0, filled);
    }
  }

  /** Skips `length` bytes; false when the stream ended first. */
  async skip(length: number): Promise<boolean> {
    let left = length;
    for (;;) {
      const take = Math.min(left, this.chunk.length - this.at);
      this.at += take;
      this.position += take;
      left -= take;
      if (left === 0) return true;
      if (!(await this.pull())) return false;
    }
  }

  async close(): Promise<void> {
    await this.iterator.return?.();
  }

  private async pull(): Promise<boolean> {
    if (this.ended) return false;
    for (;;) {
      const next = await this.iterator.next();
      if (next.done) {
        this.ended = true;
        return false;
      }
      if (next.value.length === 0) continue;
      this.chunk = next.value;
      this.at = 0;
      return true;
    }
  }
}

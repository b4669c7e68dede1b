// A growing UTF-8 buffer for building big documents. Pieces are gathered into a string of a few tens of kilobytes,
// then copied into the buffer, so they die young: the garbage collector does not copy and re-mark megabytes of
// short strings the way an array of pieces joined at the end makes it do.

const flushAt = 1 << 16;

export class TextSink {
  private buffer: Buffer;
  private length = 0;
  private pending = '';

  /** `expectedBytes` sizes the buffer up front; it grows by doubling when that was too little. */
  constructor(expectedBytes = 1 << 16) {
    this.buffer = Buffer.allocUnsafe(Math.max(expectedBytes, flushAt * 4));
  }

  append(text: string): void {
    this.pending += text;
    if (this.pending.length >= flushAt) this.flush();
  }

  toString(): string {
    this.flush();
    return this.buffer.toString('utf8', 0, this.length);
  }

  private flush(): void {
    // Three bytes per UTF-16 unit is the most UTF-8 can need.
    const needed = this.length + this.pending.length * 3;
    if (needed > this.buffer.length) {
      const bigger = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
      this.buffer.copy(bigger, 0, 0, this.length);
      this.buffer = bigger;
    }
    this.length += this.buffer.write(this.pending, this.length);
    this.pending = '';
  }
}

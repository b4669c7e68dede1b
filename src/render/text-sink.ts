// A growing UTF-8 buffer for building big documents. Takes text, pieces encoded once by `encodeText`, and numbers;
// gives the document as one string at the end. Recurring text is encoded once and copied, numbers are written
// digit by digit: writing a flame-graph frame allocates nothing, so the garbage collector has no megabytes of
// short strings to copy and mark, and no rope of pieces is flattened at the end.

import { isAscii } from 'node:buffer';

/** Text encoded once, to be copied many times with `TextSink.piece`. */
export type EncodedText = Uint8Array;

export function encodeText(text: string): EncodedText {
  return Buffer.from(text, 'utf8');
}

/** Room `TextSink.fixed` and `TextSink.number` may take, at most (two 24-character doubles and a point). */
export const maxNumberBytes = 64;

export class TextSink {
  private buffer: Buffer;
  private length = 0;

  /** `expectedBytes` sizes the buffer up front; it grows by doubling when that was too little. */
  constructor(expectedBytes = 1 << 16) {
    this.buffer = Buffer.allocUnsafe(Math.max(expectedBytes, 1 << 16));
  }

  /** Makes room for `bytes` more bytes: `piece`, `prefix`, `number` and `fixed` write only into room made so. */
  reserve(bytes: number): void {
    const needed = this.length + bytes;
    if (needed <= this.buffer.length) return;
    const bigger = Buffer.allocUnsafe(Math.max(needed, this.buffer.length * 2));
    this.buffer.copy(bigger, 0, 0, this.length);
    this.buffer = bigger;
  }

  /** Any text (it makes its own room). */
  append(text: string): void {
    // Three bytes per UTF-16 unit is the most UTF-8 can need.
    this.reserve(text.length * 3);
    this.length += this.buffer.write(text, this.length);
  }

  piece(bytes: EncodedText): void {
    this.prefix(bytes, bytes.length);
  }

  /** The first `end` bytes of `bytes`. */
  prefix(bytes: EncodedText, end: number): void {
    const buffer = this.buffer;
    const at = this.length;
    // A byte loop beats the call into TypedArray#set for the short pieces most frames are made of, and a cut
    // piece would need a subarray object made for it.
    if (end > 32 && end === bytes.length) buffer.set(bytes, at);
    else for (let i = 0; i < end; i++) buffer[at + i] = bytes[i]!;
    this.length = at + end;
  }

  /** `n` as String(n) prints it. */
  number(n: number): void {
    if (n >= 0 && n <= Number.MAX_SAFE_INTEGER && Number.isInteger(n)) this.digits(n);
    else this.append(String(n));
  }

  /** `n` as `fixedText(n)` prints it. */
  fixed(n: number): void {
    const hundredths = Math.round(n * 100);
    if (!(hundredths >= 0 && hundredths <= Number.MAX_SAFE_INTEGER)) {
      this.append(fixedText(n));
      return;
    }
    const whole = Math.floor(hundredths / 100);
    const fraction = hundredths - whole * 100;
    this.digits(whole);
    if (fraction === 0) return;
    const buffer = this.buffer;
    const tenths = Math.floor(fraction / 10);
    const last = fraction - tenths * 10;
    buffer[this.length++] = 46; // '.'
    buffer[this.length++] = 48 + tenths;
    if (last !== 0) buffer[this.length++] = 48 + last;
  }

  toString(): string {
    const bytes = this.buffer.subarray(0, this.length);
    // Most documents are ASCII: Node copies those as Latin-1 several times faster than it decodes UTF-8.
    return isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
  }

  /** A safe integer, not negative, in decimal. */
  private digits(n: number): void {
    let count = 1;
    for (let power = 10; power <= n; power *= 10) count++;
    const buffer = this.buffer;
    let at = this.length + count;
    this.length = at;
    do {
      const rest = Math.floor(n / 10);
      buffer[--at] = 48 + (n - rest * 10);
      n = rest;
    } while (n > 0);
  }
}

/**
 * `n` to two decimals, trailing zeros dropped: like String(Math.round(n * 100) / 100), but through integers, which
 * V8 prints several times faster than fractions.
 */
export function fixedText(n: number): string {
  const hundredths = Math.round(n * 100);
  const whole = Math.floor(hundredths / 100);
  const fraction = hundredths - whole * 100;
  if (fraction === 0) return `${whole}`;
  if (fraction % 10 === 0) return `${whole}.${fraction / 10}`;
  return fraction < 10 ? `${whole}.0${fraction}` : `${whole}.${fraction}`;
}

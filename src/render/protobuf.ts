// The protocol buffers wire format, the part pprof needs to write: varints, length-delimited fields (strings,
// packed numbers, nested messages) on a growable buffer. Encoding only; decoders we did not write check it in tests.
// Numbers are JavaScript numbers: exact up to 2^53, which every count, id and nanosecond total here stays under.

const wireVarint = 0;
const wireLengthDelimited = 2;

/** A message being written: fields in the order they are added, as the format allows. */
export class ProtoWriter {
  private buffer: Uint8Array;
  private length = 0;
  private static readonly encoder = new TextEncoder();

  constructor(initialBytes = 256) {
    this.buffer = new Uint8Array(initialBytes);
  }

  /** Empties the message, keeping its buffer (one writer serves every nested message of a kind). */
  reset(): this {
    this.length = 0;
    return this;
  }

  /** A varint field; zero is left out, as proto3 leaves out default values. */
  uint(field: number, value: number): this {
    if (value === 0) return this;
    this.tag(field, wireVarint);
    this.varint(value);
    return this;
  }

  /** A varint field from a bigint, for values past 2^53 (nanoseconds since 1970); zero is left out. */
  bigUint(field: number, value: bigint): this {
    if (value === 0n) return this;
    if (value < 0n || value >= 1n << 64n) throw new RangeError(`not a protobuf varint: ${value}`);
    this.tag(field, wireVarint);
    this.reserve(10);
    let v = value;
    while (v >= 0x80n) {
      this.buffer[this.length++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buffer[this.length++] = Number(v);
    return this;
  }

  /** A string field, written even when empty (string_table[0] must be ""). */
  string(field: number, text: string): this {
    const bytes = ProtoWriter.encoder.encode(text);
    return this.bytes(field, bytes);
  }

  /** A length-delimited field of raw bytes (a nested message, a string's UTF-8). */
  bytes(field: number, bytes: Uint8Array): this {
    this.tag(field, wireLengthDelimited);
    this.varint(bytes.length);
    return this.raw(bytes);
  }

  /** A packed repeated varint field (left out when empty). */
  packed(field: number, values: ArrayLike<number>): this {
    if (values.length === 0) return this;
    let size = 0;
    for (let i = 0; i < values.length; i++) size += varintSize(values[i]!);
    this.tag(field, wireLengthDelimited);
    this.varint(size);
    for (let i = 0; i < values.length; i++) this.varint(values[i]!);
    return this;
  }

  /** Bytes already in the wire format (fields another writer wrote), appended as they are. */
  raw(bytes: Uint8Array): this {
    this.reserve(bytes.length);
    this.buffer.set(bytes, this.length);
    this.length += bytes.length;
    return this;
  }

  /** A nested message field. */
  message(field: number, message: ProtoWriter): this {
    return this.bytes(field, message.finish());
  }

  /** The bytes written so far (a view: copy it before writing more). */
  finish(): Uint8Array {
    return this.buffer.subarray(0, this.length);
  }

  private tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  private varint(value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`not a protobuf varint: ${value}`);
    this.reserve(10);
    let v = value;
    // Above 2^31 bit operations would wrap: divide instead.
    while (v >= 0x80) {
      this.buffer[this.length++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buffer[this.length++] = v;
  }

  private reserve(bytes: number): void {
    if (this.length + bytes <= this.buffer.length) return;
    let size = this.buffer.length * 2;
    while (size < this.length + bytes) size *= 2;
    const grown = new Uint8Array(size);
    grown.set(this.buffer.subarray(0, this.length));
    this.buffer = grown;
  }
}

function varintSize(value: number): number {
  let size = 1;
  for (let v = value; v >= 0x80; v = Math.floor(v / 0x80)) size++;
  return size;
}

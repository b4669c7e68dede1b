// A bounded reader of the little-endian DWARF encodings call frame information uses: fixed-size integers, LEB128
// and the pointer encodings of `.eh_frame` (DW_EH_PE_*). Takes a section's bytes, its virtual address and a window
// inside it; gives numbers. Every read past the window's end, a LEB128 longer than 10 bytes and a value a double
// cannot hold exactly throws CfiDataError, which the readers above turn into a counted skip: none leaves them.

/** Thrown by a read that would leave its window or yield an unusable value. Internal to the CFI readers. */
export class CfiDataError extends Error {
  override readonly name = 'CfiDataError';
}

/** The longest LEB128 read: ten bytes hold 70 bits, more than any 64-bit value needs. */
const maxLeb128Bytes = 10;

/** DW_EH_PE_* (LSB's `.eh_frame` pointer encodings): the format in the low nibble, how it applies above. */
export const pointerEncoding = Object.freeze({
  absptr: 0x00,
  uleb128: 0x01,
  udata2: 0x02,
  udata4: 0x03,
  udata8: 0x04,
  sleb128: 0x09,
  sdata2: 0x0a,
  sdata4: 0x0b,
  sdata8: 0x0c,
  pcrel: 0x10,
  textrel: 0x20,
  datarel: 0x30,
  funcrel: 0x40,
  aligned: 0x50,
  indirect: 0x80,
  omit: 0xff,
});

/** What relative encodings are relative to; an encoding whose base is not given is unusable. */
export interface PointerBases {
  /** DW_EH_PE_datarel: `.eh_frame_hdr`'s address in its search table (undefined in `.eh_frame`). */
  data?: number;
}

export class DwarfCursor {
  private readonly view: DataView;

  /** Reads `bytes[at, end)`; `address` is the virtual address of `bytes[0]` (for pc-relative pointers). */
  constructor(
    readonly bytes: Uint8Array,
    readonly address: number,
    public at: number,
    public end: number,
  ) {
    if (at < 0 || end > bytes.length || at > end) throw new CfiDataError(`window ${at}..${end} outside the section`);
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  get left(): number {
    return this.end - this.at;
  }

  private take(n: number): number {
    const at = this.at;
    if (n > this.end - at) throw new CfiDataError(`${n} bytes past the end at ${at}`);
    this.at = at + n;
    return at;
  }

  skip(n: number): void {
    if (!Number.isSafeInteger(n) || n < 0) throw new CfiDataError(`skip of ${n}`);
    this.take(n);
  }

  u8(): number {
    return this.bytes[this.take(1)]!;
  }
  s8(): number {
    return this.view.getInt8(this.take(1));
  }
  u16(): number {
    return this.view.getUint16(this.take(2), true);
  }
  s16(): number {
    return this.view.getInt16(this.take(2), true);
  }
  u32(): number {
    return this.view.getUint32(this.take(4), true);
  }
  s32(): number {
    return this.view.getInt32(this.take(4), true);
  }
  u64(): number {
    return exact(this.view.getBigUint64(this.take(8), true));
  }
  s64(): number {
    return exact(this.view.getBigInt64(this.take(8), true));
  }
  u64n(): bigint {
    return this.view.getBigUint64(this.take(8), true);
  }
  s64n(): bigint {
    return this.view.getBigInt64(this.take(8), true);
  }

  /** An unsigned LEB128 as a number (one past 2^53 throws); in doubles, the CFA programs' hot path. */
  uleb(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < maxLeb128Bytes; i++) {
      const byte = this.u8();
      value += (byte & 0x7f) * scale;
      if ((byte & 0x80) === 0) {
        if (!Number.isSafeInteger(value)) throw new CfiDataError('LEB128 past 2^53');
        return value;
      }
      scale *= 128;
    }
    throw new CfiDataError('LEB128 longer than 10 bytes');
  }

  sleb(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < maxLeb128Bytes; i++) {
      const byte = this.u8();
      value += (byte & 0x7f) * scale;
      scale *= 128;
      if ((byte & 0x80) === 0) {
        if (byte & 0x40) value -= scale;
        if (!Number.isSafeInteger(value)) throw new CfiDataError('LEB128 past 2^53');
        return value;
      }
    }
    throw new CfiDataError('LEB128 longer than 10 bytes');
  }

  ulebn(): bigint {
    let value = 0n;
    let shift = 0n;
    for (let i = 0; i < maxLeb128Bytes; i++) {
      const byte = this.u8();
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return BigInt.asUintN(64, value);
      shift += 7n;
    }
    throw new CfiDataError('LEB128 longer than 10 bytes');
  }

  slebn(): bigint {
    let value = 0n;
    let shift = 0n;
    for (let i = 0; i < maxLeb128Bytes; i++) {
      const byte = this.u8();
      value |= BigInt(byte & 0x7f) << shift;
      shift += 7n;
      if ((byte & 0x80) === 0) {
        if (byte & 0x40) value -= 1n << shift;
        return BigInt.asIntN(64, value);
      }
    }
    throw new CfiDataError('LEB128 longer than 10 bytes');
  }

  /** A NUL-terminated string of at most `max` bytes, as latin1. */
  cString(max: number): string {
    const limit = Math.min(this.end, this.at + max);
    const nul = this.bytes.subarray(this.at, limit).indexOf(0);
    if (nul < 0) throw new CfiDataError(`string longer than ${max} bytes or unterminated`);
    const text = String.fromCharCode(...this.bytes.subarray(this.at, this.at + nul));
    this.at += nul + 1;
    return text;
  }

  /** A value in one of the formats of an encoding's low nibble (DW_EH_PE_absptr is 8 bytes: x86-64). */
  encodedValue(format: number): number {
    switch (format & 0x0f) {
      case pointerEncoding.absptr:
      case pointerEncoding.udata8:
        return this.u64();
      case pointerEncoding.uleb128:
        return this.uleb();
      case pointerEncoding.udata2:
        return this.u16();
      case pointerEncoding.udata4:
        return this.u32();
      case pointerEncoding.sleb128:
        return this.sleb();
      case pointerEncoding.sdata2:
        return this.s16();
      case pointerEncoding.sdata4:
        return this.s32();
      case pointerEncoding.sdata8:
        return this.s64();
      default:
        throw new CfiDataError(`pointer format ${format & 0x0f}`);
    }
  }

  /** Steps over a pointer in `encoding` without making a value of it (a personality routine's). */
  skipPointer(encoding: number): void {
    if ((encoding & 0x70) === pointerEncoding.aligned) this.skip((8 - (this.at % 8)) % 8);
    const format = encoding & 0x0f;
    // A signed LEB128 spans the bytes an unsigned one does.
    if (format === pointerEncoding.uleb128 || format === pointerEncoding.sleb128) this.ulebn();
    else if (fixedSizes[format] !== undefined) this.skip(fixedSizes[format]);
    else throw new CfiDataError(`pointer format ${format}`);
  }

  /**
   * A pointer in `encoding`, as a virtual address. An indirect pointer (the address of the pointer) is returned as
   * that address with `indirect` set: reading it needs the process's memory.
   */
  pointer(encoding: number, bases: PointerBases = {}): { value: number; indirect: boolean } {
    if (encoding === pointerEncoding.omit) throw new CfiDataError('omitted pointer');
    const application = encoding & 0x70;
    if (application === pointerEncoding.aligned) this.skip((8 - (this.at % 8)) % 8);
    const fieldAddress = this.address + this.at;
    let value = this.encodedValue(encoding);
    if (application === pointerEncoding.pcrel) value += fieldAddress;
    else if (application === pointerEncoding.datarel) {
      if (bases.data === undefined) throw new CfiDataError('datarel pointer without a data base');
      value += bases.data;
    } else if (application !== pointerEncoding.absptr && application !== pointerEncoding.aligned)
      throw new CfiDataError(`pointer application 0x${application.toString(16)}`);
    if (!Number.isSafeInteger(value) || value < 0) throw new CfiDataError(`pointer ${value} out of range`);
    return { value, indirect: (encoding & pointerEncoding.indirect) !== 0 };
  }
}

/** The bytes of the fixed-size pointer formats. */
const fixedSizes: Record<number, number> = { 0x00: 8, 0x02: 2, 0x03: 4, 0x04: 8, 0x0a: 2, 0x0b: 4, 0x0c: 8 };

function exact(value: bigint): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER) || value < BigInt(Number.MIN_SAFE_INTEGER))
    throw new CfiDataError(`value ${value} past 2^53`);
  return Number(value);
}

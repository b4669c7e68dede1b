// Named code ranges in columns: what a perf map or jitdump of a million methods becomes, in about 25 bytes a range
// plus its name, against several hundred as objects with bigints. 64-bit starts and sizes are kept as pairs of 32-bit
// halves, names as slices of the bytes they were read from (an ASCII name is never turned into a string until a
// frame asks for it) or, for the rare name that is not ASCII, as a string. Appending only. CodeMap (code-map.ts)
// builds the address lookup over it.

/** A named range of code: [start, start + size). */
export interface CodeSymbol {
  start: bigint;
  size: bigint;
  name: string;
}

const twoTo32 = 2 ** 32;
/** `chunkOf` for a name kept as a string. */
const stringName = 0xffff;

/** Named ranges in insertion order, in columns. Appending only: entries are never changed or removed. */
export class SymbolTable {
  private count = 0;
  private startHi: Uint32Array;
  private startLo: Uint32Array;
  private sizeHi: Uint32Array;
  private sizeLo: Uint32Array;
  /** Which of `chunks` holds the name's bytes (stringName: `strings` holds the name). */
  private chunkOf: Uint16Array;
  private nameStart: Uint32Array;
  private nameLength: Uint32Array;
  private readonly chunks: Buffer[] = [];
  private readonly strings = new Map<number, string>();

  constructor(capacity = 16) {
    capacity = Math.max(capacity, 1);
    this.startHi = new Uint32Array(capacity);
    this.startLo = new Uint32Array(capacity);
    this.sizeHi = new Uint32Array(capacity);
    this.sizeLo = new Uint32Array(capacity);
    this.chunkOf = new Uint16Array(capacity);
    this.nameStart = new Uint32Array(capacity);
    this.nameLength = new Uint32Array(capacity);
  }

  /** A table of these symbols, in this order. */
  static of(symbols: readonly CodeSymbol[]): SymbolTable {
    const table = new SymbolTable(symbols.length);
    for (const s of symbols) table.addString(s.start, s.size, s.name);
    return table;
  }

  get length(): number {
    return this.count;
  }

  /** Makes `bytes` a source of names for `add`; returns its number. The table keeps it alive. */
  addChunk(bytes: Buffer): number {
    if (this.chunks.length === stringName) throw new RangeError('too many name chunks');
    return this.chunks.push(bytes) - 1;
  }

  /** Appends a range named by `length` bytes of chunk `chunk` from `offset`, which must all be ASCII. */
  add(startHi: number, startLo: number, sizeHi: number, sizeLo: number, chunk: number, offset: number, length: number) {
    const i = this.slot(startHi, startLo, sizeHi, sizeLo);
    this.chunkOf[i] = chunk;
    this.nameStart[i] = offset;
    this.nameLength[i] = length;
  }

  /** Appends a range named by a string (any name; `add` is for ASCII bytes). */
  addString(start: bigint, size: bigint, name: string): void {
    const i = this.slot(hi(start), lo(start), hi(size), lo(size));
    this.chunkOf[i] = stringName;
    this.strings.set(i, name);
  }

  name(i: number): string {
    const chunk = this.chunkOf[i]!;
    if (chunk === stringName) return this.strings.get(i)!;
    const start = this.nameStart[i]!;
    // ASCII, so Latin-1 decoding is exact (and the fastest there is).
    return this.chunks[chunk]!.toString('latin1', start, start + this.nameLength[i]!);
  }

  symbol(i: number): CodeSymbol {
    return {
      start: (BigInt(this.startHi[i]!) << 32n) | BigInt(this.startLo[i]!),
      size: (BigInt(this.sizeHi[i]!) << 32n) | BigInt(this.sizeLo[i]!),
      name: this.name(i),
    };
  }

  toArray(): CodeSymbol[] {
    return Array.from({ length: this.count }, (_, i) => this.symbol(i));
  }

  /** How many names end with one of `suffixes` (ASCII). */
  countNamesEndingWith(suffixes: readonly string[]): number {
    const encoded = suffixes.map((s) => Buffer.from(s, 'latin1'));
    let found = 0;
    for (let i = 0; i < this.count; i++) {
      const chunk = this.chunkOf[i]!;
      if (chunk === stringName) {
        const name = this.strings.get(i)!;
        if (suffixes.some((s) => name.endsWith(s))) found++;
        continue;
      }
      const bytes = this.chunks[chunk]!;
      const end = this.nameStart[i]! + this.nameLength[i]!;
      for (const suffix of encoded) {
        if (suffix.length <= this.nameLength[i]! && endsWith(bytes, end, suffix)) {
          found++;
          break;
        }
      }
    }
    return found;
  }

  /**
   * Appends, in their order, the entries of `other` that this table lacks (no entry with the same start, size and
   * name); returns how many. Their names are copied, so `other` and the bytes it read from can be let go.
   */
  appendMissing(other: SymbolTable): number {
    const missing = other.missingFrom(this);
    let bytes = 0;
    let withBytes = 0;
    for (const j of missing) {
      if (other.chunkOf[j] === stringName) continue;
      bytes += other.nameLength[j]!;
      withBytes++;
    }
    if (this.count + missing.length > this.startHi.length) this.grow(this.count + missing.length);
    const pool = Buffer.allocUnsafe(bytes);
    const chunk = withBytes > 0 ? this.addChunk(pool) : stringName;
    let used = 0;
    for (const j of missing) {
      if (other.chunkOf[j] === stringName) {
        const i = this.slot(other.startHi[j]!, other.startLo[j]!, other.sizeHi[j]!, other.sizeLo[j]!);
        this.chunkOf[i] = stringName;
        this.strings.set(i, other.strings.get(j)!);
        continue;
      }
      const from = other.nameStart[j]!;
      const length = other.nameLength[j]!;
      pool.set(other.chunks[other.chunkOf[j]!]!.subarray(from, from + length), used);
      this.add(other.startHi[j]!, other.startLo[j]!, other.sizeHi[j]!, other.sizeLo[j]!, chunk, used, length);
      used += length;
    }
    return missing.length;
  }

  /**
   * Indices of this table's entries that `table` has no copy of. The runtime writes its methods to the perf map and
   * the jitdump in the same order, so the entry after the last one found is tried first; a hash of (start, size)
   * over `table`, made when first needed, finds the others.
   */
  private missingFrom(table: SymbolTable): number[] {
    const missing: number[] = [];
    let hashed: { slots: Uint32Array; mask: number } | undefined;
    let next = 0;
    for (let j = 0; j < this.count; j++) {
      if (next < table.count && this.sameAs(j, table, next)) {
        next++;
        continue;
      }
      hashed ??= table.hashRanges();
      const { slots, mask } = hashed;
      const hash = this.rangeHash(j);
      let found = -1;
      for (let h = hash & mask; slots[2 * h] !== 0; h = (h + 1) & mask) {
        if (slots[2 * h + 1] === hash && this.sameAs(j, table, slots[2 * h]! - 1)) {
          found = slots[2 * h]! - 1;
          break;
        }
      }
      if (found < 0) missing.push(j);
      else next = found + 1;
    }
    return missing;
  }

  /**
   * An open-addressing hash set of this table's entries by (start, size): slot h is (index + 1, or 0 when empty; the
   * hash) at 2h and 2h + 1, side by side so that a probe touches one cache line.
   */
  private hashRanges(): { slots: Uint32Array; mask: number } {
    const mask = 2 ** Math.max(4, Math.ceil(Math.log2(this.count * 2 + 1))) - 1;
    const slots = new Uint32Array(2 * (mask + 1));
    for (let i = 0; i < this.count; i++) {
      const hash = this.rangeHash(i);
      let h = hash & mask;
      while (slots[2 * h] !== 0) h = (h + 1) & mask;
      slots[2 * h] = i + 1;
      slots[2 * h + 1] = hash;
    }
    return { slots, mask };
  }

  private rangeHash(i: number): number {
    let h = Math.imul(this.startLo[i]! ^ 0x9e3779b9, 0x85ebca6b);
    h = Math.imul(h ^ this.startHi[i]! ^ (h >>> 15), 0xc2b2ae35);
    h = Math.imul(h ^ this.sizeLo[i]! ^ (h >>> 13), 0x27d4eb2f);
    h = Math.imul(h ^ this.sizeHi[i]! ^ (h >>> 16), 0x165667b1);
    return (h ^ (h >>> 15)) >>> 0;
  }

  private sameAs(i: number, other: SymbolTable, j: number): boolean {
    if (
      this.startLo[i] !== other.startLo[j] ||
      this.startHi[i] !== other.startHi[j] ||
      this.sizeLo[i] !== other.sizeLo[j] ||
      this.sizeHi[i] !== other.sizeHi[j]
    )
      return false;
    const a = this.chunkOf[i]!;
    const b = other.chunkOf[j]!;
    if (a === stringName || b === stringName) return this.name(i) === other.name(j);
    const length = this.nameLength[i]!;
    if (length !== other.nameLength[j]) return false;
    const from = this.nameStart[i]!;
    const to = other.nameStart[j]!;
    return this.chunks[a]!.compare(other.chunks[b]!, to, to + length, from, from + length) === 0;
  }

  private slot(startHi: number, startLo: number, sizeHi: number, sizeLo: number): number {
    if (this.count === this.startHi.length) this.grow(this.count * 2);
    const i = this.count++;
    this.startHi[i] = startHi;
    this.startLo[i] = startLo;
    this.sizeHi[i] = sizeHi;
    this.sizeLo[i] = sizeLo;
    return i;
  }

  private grow(capacity: number): void {
    const bigger = <A extends Uint32Array | Uint16Array>(old: A, make: (n: number) => A): A => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    const u32 = (n: number) => new Uint32Array(n);
    this.startHi = bigger(this.startHi, u32);
    this.startLo = bigger(this.startLo, u32);
    this.sizeHi = bigger(this.sizeHi, u32);
    this.sizeLo = bigger(this.sizeLo, u32);
    this.chunkOf = bigger(this.chunkOf, (n) => new Uint16Array(n));
    this.nameStart = bigger(this.nameStart, u32);
    this.nameLength = bigger(this.nameLength, u32);
  }

  /** For CodeMap: the entry of nonzero size that starts lowest, or -1 when there is none. */
  lowest(): number {
    let lowest = -1;
    for (let i = 0; i < this.count; i++) {
      if (this.sizeHi[i] === 0 && this.sizeLo[i] === 0) continue;
      const below =
        lowest < 0 ||
        this.startHi[i]! < this.startHi[lowest]! ||
        (this.startHi[i] === this.startHi[lowest] && this.startLo[i]! < this.startLo[lowest]!);
      if (below) lowest = i;
    }
    return lowest;
  }

  /** For CodeMap: entry i's start minus entry `base`'s as a double, exact below 2^53 (and at least 2^53 above). */
  offsetOf(i: number, base: number): number {
    return (this.startHi[i]! - this.startHi[base]!) * twoTo32 + (this.startLo[i]! - this.startLo[base]!);
  }

  /** For CodeMap: entry i's size as a double, exact below 2^53 (and at least 2^53 above). */
  sizeOf(i: number): number {
    return this.sizeHi[i]! * twoTo32 + this.sizeLo[i]!;
  }
}

/** Whether `bytes` before `end` hold `suffix`. */
function endsWith(bytes: Uint8Array, end: number, suffix: Uint8Array): boolean {
  for (let k = 1; k <= suffix.length; k++) if (bytes[end - k] !== suffix[suffix.length - k]) return false;
  return true;
}

const hi = (n: bigint) => Number((n >> 32n) & 0xffff_ffffn);
const lo = (n: bigint) => Number(n & 0xffff_ffffn);

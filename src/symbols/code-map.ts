// Named code ranges in (from perf maps and jitdumps, oldest first), an address-to-name lookup out. Ranges may overlap
// (code freed and reused, a method logged again after EnablePerfMap replays what was already compiled): at every
// address the range added last wins, even where it covers only part of an older one, and the older one still names
// the addresses the newer one does not cover.
//
// A big service logs a million methods or more, so ranges are kept in columns (SymbolTable): 64-bit starts and sizes
// as pairs of 32-bit halves, names as slices of the bytes they were read from (an ASCII name is never turned into a
// string until a frame asks for it) or, for the rare name that is not ASCII, as a string. About 25 bytes a range plus
// its name, against several hundred as objects with bigints.
//
// The lookup is built once with a sweep over the range boundaries (a max-heap of the ranges open at each point, keyed
// by insertion order), giving disjoint segments searched by bisection: O(n log n) to build, O(log n) per lookup, all
// in typed arrays. Addresses are kept as doubles relative to the lowest start, which is exact while ranges lie within
// 2^53 bytes of each other (a process's code lies within 2^47).

import type { CodeSymbol } from './perfmap.js';

/** Ranges starting this far or farther above the lowest one are ignored: their offsets would not be exact. */
const maxSpan = 2 ** 53;
const maxSpanBig = BigInt(maxSpan);
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

export class CodeMap {
  private readonly table: SymbolTable;
  private readonly base: bigint;
  private readonly starts: Float64Array;
  private readonly ends: Float64Array;
  private readonly owners: Uint32Array;

  /** `symbols` oldest first; ranges of size 0 are ignored. */
  constructor(symbols: readonly CodeSymbol[] | SymbolTable) {
    const table = symbols instanceof SymbolTable ? symbols : SymbolTable.of(symbols);
    this.table = table;
    const lowest = table.lowest();
    this.base = lowest < 0 ? 0n : table.symbol(lowest).start;
    const segments = buildSegments(table, lowest);
    this.starts = segments.starts;
    this.ends = segments.ends;
    this.owners = segments.owners;
  }

  /** Number of disjoint segments (for figures and tests). */
  get size(): number {
    return this.owners.length;
  }

  /** The newest range holding `address`, if any. */
  lookup(address: bigint): CodeSymbol | undefined {
    const i = this.find(address);
    return i < 0 ? undefined : this.table.symbol(i);
  }

  /** The name of the newest range holding `address`, if any. */
  lookupName(address: bigint): string | undefined {
    const i = this.find(address);
    return i < 0 ? undefined : this.table.name(i);
  }

  /** The table index of the newest range holding `address`, or -1. */
  private find(address: bigint): number {
    const offset = address - this.base;
    if (offset < 0n || offset >= maxSpanBig) return -1;
    const a = Number(offset);
    const starts = this.starts;
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid]! <= a) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 && a < this.ends[lo - 1]! ? this.owners[lo - 1]! : -1;
  }
}

interface Segments {
  starts: Float64Array;
  ends: Float64Array;
  owners: Uint32Array;
}

function buildSegments(table: SymbolTable, base: number): Segments {
  // The ranges kept, in insertion order: r is a range's number, ids[r] its table index; a later r is newer.
  const ids = new Uint32Array(table.length);
  const rangeStart = new Float64Array(table.length);
  const rangeEnd = new Float64Array(table.length);
  let n = 0;
  for (let i = 0; i < table.length; i++) {
    const size = table.sizeOf(i);
    if (size <= 0) continue;
    const offset = table.offsetOf(i, base);
    if (offset >= maxSpan) continue;
    const end = offset + size;
    ids[n] = i;
    rangeStart[n] = offset;
    rangeEnd[n] = end < maxSpan ? end : maxSpan;
    n++;
  }
  const { order, keys } = sortByKey(rangeStart, n);

  // A sweep from start to start: the newest open range owns the addresses up to the next start or its own end (older
  // ranges ending meanwhile change nothing), and when it ends the newest one still open takes over.
  const heap = new MaxHeap(n);
  let segments: Segments = {
    starts: new Float64Array(n + 1),
    ends: new Float64Array(n + 1),
    owners: new Uint32Array(n + 1),
  };
  let count = 0;
  let s = 0;
  let point = n > 0 ? keys[0]! : 0;
  while (s < n || heap.size > 0) {
    while (s < n && keys[s] === point) heap.push(order[s++]!);
    // Ranges that ended at or before this point are dropped lazily, when they reach the top.
    while (heap.size > 0 && rangeEnd[heap.top()]! <= point) heap.pop();
    if (heap.size === 0) {
      if (s < n) point = keys[s]!;
      continue;
    }
    const top = heap.top();
    const next = s < n && keys[s]! < rangeEnd[top]! ? keys[s]! : rangeEnd[top]!;
    const owner = ids[top]!;
    if (count > 0 && segments.owners[count - 1] === owner && segments.ends[count - 1] === point) {
      segments.ends[count - 1] = next;
    } else {
      if (count === segments.owners.length) segments = grown(segments, count * 2);
      segments.starts[count] = point;
      segments.ends[count] = next;
      segments.owners[count] = owner;
      count++;
    }
    point = next;
  }
  // Usually there are about as many segments as ranges: trimming would copy them all to save little.
  if (count >= segments.owners.length * 0.9) {
    const { starts, ends, owners } = segments;
    return { starts: starts.subarray(0, count), ends: ends.subarray(0, count), owners: owners.subarray(0, count) };
  }
  return grown(segments, count);
}

/** `segments` copied into arrays of `length` (to grow them, or trim them to what is used). */
function grown(segments: Segments, length: number): Segments {
  const starts = new Float64Array(length);
  const ends = new Float64Array(length);
  const owners = new Uint32Array(length);
  const used = Math.min(length, segments.owners.length);
  starts.set(segments.starts.subarray(0, used));
  ends.set(segments.ends.subarray(0, used));
  owners.set(segments.owners.subarray(0, used));
  return { starts, ends, owners };
}

/**
 * The numbers 0..n-1 ordered by `keys` (integers below 2^53), equal keys in number order, and the keys in that order.
 * An LSD radix sort, 16 bits a pass, skipping the passes where every key has the same digit: several times faster than
 * Float64Array.prototype.sort on a million keys, and stable, which a comparison sort by (key, number) would need.
 */
function sortByKey(keys: Float64Array, n: number): { order: Uint32Array; keys: Float64Array } {
  let order = new Uint32Array(n);
  let hi = new Uint32Array(n);
  let lo = new Uint32Array(n);
  for (let r = 0; r < n; r++) {
    const key = keys[r]!;
    order[r] = r;
    hi[r] = (key / twoTo32) >>> 0;
    lo[r] = key >>> 0;
  }
  let order2 = new Uint32Array(n);
  let hi2 = new Uint32Array(n);
  let lo2 = new Uint32Array(n);
  const count = new Uint32Array(1 << 16);
  for (let pass = 0; pass < 4 && n > 0; pass++) {
    const words = pass < 2 ? lo : hi;
    const shift = pass % 2 === 0 ? 0 : 16;
    count.fill(0);
    for (let r = 0; r < n; r++) {
      const digit = (words[r]! >>> shift) & 0xffff;
      count[digit] = count[digit]! + 1;
    }
    if (count[(words[0]! >>> shift) & 0xffff] === n) continue;
    let sum = 0;
    for (let digit = 0; digit < count.length; digit++) {
      const c = count[digit]!;
      count[digit] = sum;
      sum += c;
    }
    for (let r = 0; r < n; r++) {
      const digit = (words[r]! >>> shift) & 0xffff;
      const to = count[digit]!;
      count[digit] = to + 1;
      order2[to] = order[r]!;
      hi2[to] = hi[r]!;
      lo2[to] = lo[r]!;
    }
    [order, order2] = [order2, order];
    [hi, hi2] = [hi2, hi];
    [lo, lo2] = [lo2, lo];
  }
  const sorted = new Float64Array(n);
  for (let k = 0; k < n; k++) sorted[k] = hi[k]! * twoTo32 + lo[k]!;
  return { order, keys: sorted };
}

/** A binary max-heap of range numbers (a higher number is a newer range). */
class MaxHeap {
  private readonly items: Uint32Array;
  size = 0;
  constructor(capacity: number) {
    this.items = new Uint32Array(Math.max(capacity, 1));
  }

  top(): number {
    return this.items[0]!;
  }

  push(item: number): void {
    const items = this.items;
    let i = this.size++;
    while (i > 0) {
      const parent = (i - 1) >>> 1;
      if (items[parent]! >= item) break;
      items[i] = items[parent]!;
      i = parent;
    }
    items[i] = item;
  }

  pop(): void {
    const items = this.items;
    const last = items[--this.size]!;
    if (this.size === 0) return;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= this.size) break;
      const right = left + 1;
      const child = right < this.size && items[right]! > items[left]! ? right : left;
      if (items[child]! <= last) break;
      items[i] = items[child]!;
      i = child;
    }
    items[i] = last;
  }
}

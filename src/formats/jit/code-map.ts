// Named code ranges in (from perf maps and jitdumps, oldest first), an address-to-name lookup out. Ranges may overlap
// (code freed and reused, a method logged again after EnablePerfMap replays what was already compiled): at every
// address the range added last wins, even where it covers only part of an older one, and the older one still names
// the addresses the newer one does not cover.
//
// A big service logs a million methods or more, so ranges come in columns (SymbolTable, symbol-table.ts).
//
// The lookup is built once with a sweep over the range boundaries (a max-heap of the ranges open at each point, keyed
// by insertion order), giving disjoint segments searched by bisection: O(n log n) to build, O(log n) per lookup, all
// in typed arrays. Addresses are kept as doubles relative to the lowest start, which is exact while ranges lie within
// 2^53 bytes of each other (a process's code lies within 2^47).

import type { CodeSymbol } from './symbol-table.js';
import { SymbolTable } from './symbol-table.js';

/** Ranges starting this far or farther above the lowest one are ignored: their offsets would not be exact. */
const maxSpan = 2 ** 53;
const maxSpanBig = BigInt(maxSpan);
const twoTo32 = 2 ** 32;

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

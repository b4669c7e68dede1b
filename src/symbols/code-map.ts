// Named code ranges in (from perf maps and jitdumps, oldest first), an address-to-name lookup out. Ranges may overlap
// (code freed and reused, a method logged again after EnablePerfMap replays what was already compiled): at every
// address the range added last wins, even where it covers only part of an older one, and the older one still names
// the addresses the newer one does not cover.
//
// Built once with a sweep over the range boundaries (a max-heap of the ranges open at each point, keyed by insertion
// order), giving disjoint segments searched by bisection: O(n log n) to build, O(log n) per lookup. Addresses are
// kept as doubles relative to the lowest start, which is exact while ranges lie within 2^53 bytes of each other (a
// process's code lies within 2^47): bigint arithmetic made building 200,000 ranges take seconds.

import type { CodeSymbol } from './perfmap.js';

/** Ranges starting this far or farther above the lowest one are ignored: their offsets would not be exact. */
const maxSpan = 2 ** 53;

export class CodeMap<T extends CodeSymbol = CodeSymbol> {
  private readonly base: bigint;
  private readonly starts: Float64Array;
  private readonly ends: Float64Array;
  private readonly owners: T[];

  /** `symbols` oldest first; ranges of size 0 are ignored. */
  constructor(symbols: readonly T[]) {
    let base: bigint | undefined;
    for (const s of symbols) if (s.size > 0n && (base === undefined || s.start < base)) base = s.start;
    this.base = base ?? 0n;
    const segments = buildSegments(symbols, this.base);
    this.starts = Float64Array.from(segments, (s) => s.start);
    this.ends = Float64Array.from(segments, (s) => s.end);
    this.owners = segments.map((s) => s.symbol);
  }

  /** Number of disjoint segments (for figures and tests). */
  get size(): number {
    return this.owners.length;
  }

  /** The newest range holding `address`, if any. */
  lookup(address: bigint): T | undefined {
    if (address < this.base || address - this.base >= maxSpan) return undefined;
    const a = Number(address - this.base);
    const starts = this.starts;
    let lo = 0;
    let hi = starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (starts[mid]! <= a) lo = mid + 1;
      else hi = mid;
    }
    return lo > 0 && a < this.ends[lo - 1]! ? this.owners[lo - 1] : undefined;
  }
}

interface Range<T> {
  symbol: T;
  order: number;
  start: number;
  end: number;
}

function buildSegments<T extends CodeSymbol>(symbols: readonly T[], base: bigint): Range<T>[] {
  const ranges: Range<T>[] = [];
  symbols.forEach((symbol, order) => {
    const offset = symbol.start - base;
    if (symbol.size <= 0n || offset >= maxSpan) return;
    const end = offset + symbol.size;
    ranges.push({ symbol, order, start: Number(offset), end: Number(end < maxSpan ? end : maxSpan) });
  });
  ranges.sort((a, b) => a.start - b.start || a.order - b.order);
  const boundaries = Float64Array.from(new Set(ranges.flatMap((r) => [r.start, r.end]))).sort();

  const open = new MaxHeap<Range<T>>((a, b) => a.order - b.order);
  const segments: Range<T>[] = [];
  let next = 0;
  for (let i = 0; i < boundaries.length - 1; i++) {
    const point = boundaries[i]!;
    while (next < ranges.length && ranges[next]!.start === point) open.push(ranges[next++]!);
    // Ranges that ended at or before this point are dropped lazily, when they reach the top.
    while (open.peek() && open.peek()!.end <= point) open.pop();
    const top = open.peek();
    if (!top) continue;
    const end = boundaries[i + 1]!;
    const previous = segments[segments.length - 1];
    if (previous && previous.symbol === top.symbol && previous.end === point) previous.end = end;
    else segments.push({ symbol: top.symbol, order: top.order, start: point, end });
  }
  return segments;
}

/** A binary max-heap; `order(a, b) > 0` when a ranks above b. */
class MaxHeap<T> {
  private readonly items: T[] = [];
  constructor(private readonly order: (a: T, b: T) => number) {}

  peek(): T | undefined {
    return this.items[0];
  }

  push(item: T): void {
    const items = this.items;
    items.push(item);
    let i = items.length - 1;
    while (i > 0) {
      const parent = (i - 1) >>> 1;
      if (this.order(items[i]!, items[parent]!) <= 0) break;
      [items[i], items[parent]] = [items[parent]!, items[i]!];
      i = parent;
    }
  }

  pop(): T | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (items.length === 0 || last === undefined) return top;
    items[0] = last;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let best = i;
      if (left < items.length && this.order(items[left]!, items[best]!) > 0) best = left;
      if (right < items.length && this.order(items[right]!, items[best]!) > 0) best = right;
      if (best === i) break;
      [items[i], items[best]] = [items[best]!, items[i]!];
      i = best;
    }
    return top;
  }
}

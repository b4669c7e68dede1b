// Named code ranges in (from perf maps and jitdumps, oldest first), an address-to-name lookup out. Ranges may overlap
// (code freed and reused, a method logged again after EnablePerfMap replays what was already compiled): at every
// address the range added last wins, even where it covers only part of an older one, and the older one still names
// the addresses the newer one does not cover.
//
// Built once with a sweep over the range boundaries (a max-heap of the ranges open at each point, keyed by insertion
// order), giving disjoint segments searched by bisection: O(n log n) to build, O(log n) per lookup.

import type { CodeSymbol } from './perfmap.js';

export interface CodeMapEntry<T extends CodeSymbol = CodeSymbol> {
  /** The range that owns [start, end). */
  symbol: T;
  start: bigint;
  end: bigint;
}

export class CodeMap<T extends CodeSymbol = CodeSymbol> {
  private readonly segments: CodeMapEntry<T>[];

  /** `symbols` oldest first; ranges of size 0 are ignored. */
  constructor(symbols: readonly T[]) {
    this.segments = buildSegments(symbols);
  }

  /** Number of disjoint segments (for figures and tests). */
  get size(): number {
    return this.segments.length;
  }

  /** The newest range holding `address`, if any. */
  lookup(address: bigint): T | undefined {
    const segments = this.segments;
    let lo = 0;
    let hi = segments.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (segments[mid]!.start <= address) lo = mid + 1;
      else hi = mid;
    }
    const segment = segments[lo - 1];
    return segment && address < segment.end ? segment.symbol : undefined;
  }

  /** The disjoint segments in address order. */
  entries(): readonly CodeMapEntry<T>[] {
    return this.segments;
  }
}

function buildSegments<T extends CodeSymbol>(symbols: readonly T[]): CodeMapEntry<T>[] {
  const ranges = symbols
    .map((symbol, order) => ({ symbol, order, start: symbol.start, end: symbol.start + symbol.size }))
    .filter((r) => r.end > r.start)
    .sort((a, b) => compare(a.start, b.start) || a.order - b.order);
  const boundaries = [...new Set(ranges.flatMap((r) => [r.start, r.end]))].sort(compare);

  const open = new MaxHeap<(typeof ranges)[number]>((a, b) => a.order - b.order);
  const segments: CodeMapEntry<T>[] = [];
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
    else segments.push({ symbol: top.symbol, start: point, end });
  }
  return segments;
}

function compare(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
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

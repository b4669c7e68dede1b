// The merged call tree a flame graph draws, with each frame's place in samples. Takes FoldedStacks, whether to
// reverse them, and the lightest weight worth drawing; gives the tree as columns of numbers, one row per node in walk
// order (test/render/flame-tree.ts links them into nodes for tests), children in the order of the sorted folded
// text, each child placed after its parent's own weight. Runs of adjacent sibling frames each lighter than that are
// merged into one block, so a parent's width still adds up; a lone light frame is left out, and nothing under a light
// frame is looked at. That, and working on the sorted stack texts in place (a node is a range of them that share its
// prefix, a child frame is compared, and cut out and numbered only once kept), keeps 40 000 deep stacks fast.
import type { FoldedStacks } from '../stacks/folded.js';

export interface FlameTreeOptions {
  /** Leaf functions become roots (each stack reversed). */
  reverse: boolean;
  /** Frames lighter than this are merged with light neighbours or left out; 0 keeps everything. */
  minWeight: number;
}

/**
 * The same tree as columns, one row per node in the order a walk visits them (parents before children, children
 * left to right): no object per node, so a million-frame profile leaves the garbage collector little to do. Frame
 * texts are numbered as they are met, while their stack text is still in the processor's cache, so a writer looks
 * up what it made for a name by number rather than hashing the text again.
 */
export interface FlameColumns {
  /** Rows in use; row 0 is the root. */
  count: number;
  total: number;
  maxDepth: number;
  /** Distinct frame texts; names[0] is '' (the root's). */
  names: readonly string[];
  /** Per row: 0 root, 1 frame, 2 merged. */
  kind: Uint8Array;
  depth: Int32Array;
  start: Float64Array;
  weight: Float64Array;
  merged: Int32Array;
  /** Index in `names` of the frame's text (for 'merged', the first merged frame's). */
  name: Int32Array;
}

export const rootRow = 0;
export const frameRow = 1;
export const mergedRow = 2;

/** Row `row`'s frame text ('' for the root). */
export function rowFrame(columns: FlameColumns, row: number): string {
  return columns.names[columns.name[row]!]!;
}

/** Builds the tree of `stacks` as columns; stacks with a weight that is not positive are ignored. */
export function buildFlameColumns(stacks: FoldedStacks, options: FlameTreeOptions): FlameColumns {
  let total = 0;
  const byKey = options.reverse ? new Map<string, number>() : stacks;
  const keys: string[] = [];
  for (const [stack, weight] of stacks) {
    if (!(weight > 0)) continue;
    const key = options.reverse ? stack.split(';').reverse().join(';') : stack;
    if (options.reverse) byKey.set(key, weight);
    keys.push(key);
    total += weight;
  }
  // UTF-16 code-unit order: the stacks under any prefix form one contiguous range.
  keys.sort();
  const weights = keys.map((key) => byKey.get(key)!);
  const builder = new TreeBuilder(keys, weights, options.minWeight, total);
  if (keys.length > 0) builder.expand(rootRow, 0, keys.length, 0, 0);
  return builder.columns;
}

const semicolon = 59;

class TreeBuilder {
  readonly columns: FlameColumns;
  private readonly names: string[] = [];
  private readonly numbers = new Map<string, number>();

  constructor(
    private readonly keys: readonly string[],
    private readonly weights: readonly number[],
    private readonly minWeight: number,
    total: number,
  ) {
    const rows = Math.max(64, keys.length * 8);
    this.columns = {
      count: 0,
      total,
      maxDepth: 0,
      names: this.names,
      kind: new Uint8Array(rows),
      depth: new Int32Array(rows),
      start: new Float64Array(rows),
      weight: new Float64Array(rows),
      merged: new Int32Array(rows),
      name: new Int32Array(rows),
    };
    this.add(rootRow, 0, 0, total, 1, '');
  }

  /**
   * Adds the children of row `parent`, whose stacks are keys[lo, hi), all continuing past `parent`'s text with
   * their next frame starting at `from`, plus `parentOwn` of weight in stacks that end with `parent`.
   */
  expand(parent: number, lo: number, hi: number, from: number, parentOwn: number): void {
    const { keys, weights } = this;
    const depth = this.columns.depth[parent]! + 1;
    let x = this.columns.start[parent]! + parentOwn;
    // A run of light siblings: nothing is added while it lasts (nothing under a light frame is looked at), so it
    // becomes a row, if it is kept, when it ends.
    let runFrame = '';
    let runStart = 0;
    let runWeight = 0;
    let runMerged = 0;
    // Ranges already taken by an earlier group (see below), from their first index to their end.
    let taken: Map<number, number> | undefined;
    let k = lo;
    while (k < hi) {
      const skip = taken?.get(k);
      if (skip !== undefined) {
        k = skip;
        continue;
      }
      const key = keys[k]!;
      let end = key.indexOf(';', from);
      const ends = end < 0;
      if (ends) end = key.length;
      const frame = key.slice(from, end);
      let own = 0;
      let first = k + 1;
      if (ends) {
        // The stack that ends with `frame` sorts first, but siblings named `frame` plus a character below ';'
        // (`Run+Inner`, `Run2` after `Run`) sort before the stacks that go on under `frame`: find those.
        own = weights[k]!;
        if (first < hi && this.extendsBelowSemicolon(keys[first]!, frame, from)) {
          first = this.firstNotBelow(first, hi, frame, from);
        }
      } else first = k;
      const last = this.groupEnd(first, hi, frame, from, first === k);
      let weight = own;
      for (let j = first; j < last; j++) weight += weights[j]!;
      if (first !== k && first !== k + 1 && last > first) (taken ??= new Map()).set(first, last);
      k = first === k || first === k + 1 ? Math.max(last, k + 1) : k + 1;

      if (weight < this.minWeight) {
        if (runMerged > 0) {
          runWeight += weight;
          runMerged++;
        } else {
          runFrame = frame;
          runStart = x;
          runWeight = weight;
          runMerged = 1;
        }
      } else {
        this.addRun(runFrame, depth, runStart, runWeight, runMerged);
        runMerged = 0;
        const node = this.add(frameRow, depth, x, weight, 1, frame);
        if (last - first === 1 && own === 0) this.chain(node, first, end + 1);
        else if (last > first) this.expand(node, first, last, end + 1, own);
      }
      x += weight;
    }
    this.addRun(runFrame, depth, runStart, runWeight, runMerged);
  }

  /**
   * End of the run of keys from `first` that go on under `frame` (they are contiguous, keys being sorted). Most
   * often that run is the rest of the parent's range (its last or only child): one look at the parent's last key
   * settles it. Otherwise galloping, then halving, so a run costs a few comparisons whatever its length.
   */
  private groupEnd(first: number, hi: number, frame: string, from: number, firstContinues: boolean): number {
    if (first >= hi) return first;
    if (this.continuesUnder(this.keys[hi - 1]!, frame, from)) return hi;
    if (!firstContinues && !this.continuesUnder(this.keys[first]!, frame, from)) return first;
    let known = first; // continues
    let step = 1;
    let beyond = hi - 1; // first index known not to continue
    while (known + step < beyond) {
      if (!this.continuesUnder(this.keys[known + step]!, frame, from)) {
        beyond = known + step;
        break;
      }
      known += step;
      step *= 2;
    }
    let lo = known + 1;
    while (lo < beyond) {
      const mid = (lo + beyond) >>> 1;
      if (this.continuesUnder(this.keys[mid]!, frame, from)) lo = mid + 1;
      else beyond = mid;
    }
    return lo;
  }

  /** `key` goes on under `frame`: its text at `from` is `frame;`. */
  private continuesUnder(key: string, frame: string, from: number): boolean {
    return key.charCodeAt(from + frame.length) === semicolon && key.startsWith(frame, from);
  }

  /** `key`'s frame at `from` is `frame` followed by more characters, the first one below ';'. */
  private extendsBelowSemicolon(key: string, frame: string, from: number): boolean {
    return key.charCodeAt(from + frame.length) < semicolon && key.startsWith(frame, from);
  }

  /** First index in [lo, hi) whose key does not extend `frame` with a character below ';' (they come first). */
  private firstNotBelow(lo: number, hi: number, frame: string, from: number): number {
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.extendsBelowSemicolon(this.keys[mid]!, frame, from)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The rest of keys[k] under row `parent`: a single path, as heavy as `parent`, so every frame is kept. */
  private chain(parent: number, k: number, from: number): void {
    const key = this.keys[k]!;
    let depth = this.columns.depth[parent]!;
    const start = this.columns.start[parent]!;
    const weight = this.columns.weight[parent]!;
    while (from <= key.length) {
      let end = key.indexOf(';', from);
      if (end < 0) end = key.length;
      this.add(frameRow, ++depth, start, weight, 1, key.slice(from, end));
      from = end + 1;
    }
  }

  private addRun(frame: string, depth: number, start: number, weight: number, merged: number): void {
    if (merged > 1 && weight >= this.minWeight) this.add(mergedRow, depth, start, weight, merged, frame);
  }

  /** Appends a row; returns its index. */
  private add(kind: number, depth: number, start: number, weight: number, merged: number, frame: string): number {
    const c = this.columns;
    if (c.count === c.kind.length) this.grow();
    const row = c.count++;
    let name = this.numbers.get(frame);
    if (name === undefined) {
      name = this.names.length;
      this.names.push(frame);
      this.numbers.set(frame, name);
    }
    c.kind[row] = kind;
    c.depth[row] = depth;
    c.start[row] = start;
    c.weight[row] = weight;
    c.merged[row] = merged;
    c.name[row] = name;
    if (depth > c.maxDepth) c.maxDepth = depth;
    return row;
  }

  private grow(): void {
    const c = this.columns;
    const rows = c.kind.length * 2;
    const bigger = <T extends Uint8Array | Int32Array | Float64Array>(column: T, make: (n: number) => T): T => {
      const next = make(rows);
      next.set(column);
      return next;
    };
    c.kind = bigger(c.kind, (n) => new Uint8Array(n));
    c.depth = bigger(c.depth, (n) => new Int32Array(n));
    c.start = bigger(c.start, (n) => new Float64Array(n));
    c.weight = bigger(c.weight, (n) => new Float64Array(n));
    c.merged = bigger(c.merged, (n) => new Int32Array(n));
    c.name = bigger(c.name, (n) => new Int32Array(n));
  }
}

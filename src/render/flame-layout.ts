// The merged call tree a flame graph draws, with each frame's place in samples. Takes FoldedStacks, whether to
// reverse them, and the lightest weight worth drawing; gives the tree, children in the order of the sorted folded
// text, each child placed after its parent's own weight. Runs of adjacent sibling frames each lighter than that
// are merged into one block, so a parent's width still adds up; a lone light frame is left out, and nothing under a
// light frame is looked at. That, and working on the sorted stack texts in place (a node is a range of them that
// share its prefix, a child frame is compared, not cut out and hashed), keeps 40 000 deep stacks fast.
import type { FoldedStacks } from '../stacks/folded.js';

export interface FlameNode {
  /** 'root' is the whole profile ("all"); 'merged' stands for `merged` light adjacent siblings. */
  kind: 'root' | 'frame' | 'merged';
  /** The folded frame text (annotation included) for 'frame'; the first merged frame's for 'merged'; '' for root. */
  frame: string;
  /** 0 for the root, 1 for the outermost frames. */
  depth: number;
  /** Total weight before this frame, left to right, in the unit of the weights. */
  start: number;
  weight: number;
  /** How many frames a 'merged' block stands for; 1 otherwise. */
  merged: number;
  /** Leaves share one frozen empty array: a profile has tens of thousands of them. */
  children: readonly FlameNode[];
}

export interface FlameTree {
  root: FlameNode;
  /** Sum of all positive weights. */
  total: number;
  /** Deepest depth among the nodes kept. */
  maxDepth: number;
  /** Nodes kept, root included. */
  nodeCount: number;
}

export interface FlameTreeOptions {
  /** Leaf functions become roots (each stack reversed). */
  reverse: boolean;
  /** Frames lighter than this are merged with light neighbours or left out; 0 keeps everything. */
  minWeight: number;
}

/** Builds the tree of `stacks`; stacks with a weight that is not positive are ignored. */
export function buildFlameTree(stacks: FoldedStacks, options: FlameTreeOptions): FlameTree {
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
  const root: FlameNode = {
    kind: 'root',
    frame: '',
    depth: 0,
    start: 0,
    weight: total,
    merged: 1,
    children: noChildren,
  };
  const tree: FlameTree = { root, total, maxDepth: 0, nodeCount: 1 };
  if (keys.length > 0) new TreeBuilder(keys, weights, options.minWeight, tree).expand(root, 0, keys.length, 0, 0);
  return tree;
}

const semicolon = 59;
const noChildren: readonly FlameNode[] = Object.freeze([]);

class TreeBuilder {
  constructor(
    private readonly keys: readonly string[],
    private readonly weights: readonly number[],
    private readonly minWeight: number,
    private readonly tree: FlameTree,
  ) {}

  /**
   * Adds the children of `parent`, whose stacks are keys[lo, hi), all continuing past `parent`'s text with their
   * next frame starting at `from`, plus `parentOwn` of weight in stacks that end with `parent`.
   */
  expand(parent: FlameNode, lo: number, hi: number, from: number, parentOwn: number): void {
    const { keys, weights } = this;
    const depth = parent.depth + 1;
    let x = parent.start + parentOwn;
    let run: FlameNode | undefined;
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
        if (run) {
          run.weight += weight;
          run.merged++;
        } else run = { kind: 'merged', frame, depth, start: x, weight, merged: 1, children: noChildren };
      } else {
        this.keepRun(parent, run);
        run = undefined;
        const node: FlameNode = { kind: 'frame', frame, depth, start: x, weight, merged: 1, children: noChildren };
        this.keep(parent, node);
        if (last - first === 1 && own === 0) this.chain(node, keys[first]!, end + 1);
        else if (last > first) this.expand(node, first, last, end + 1, own);
      }
      x += weight;
    }
    this.keepRun(parent, run);
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

  /** The rest of one stack under `parent`: a single path, as heavy as `parent`, so every frame is kept. */
  private chain(parent: FlameNode, key: string, from: number): void {
    let node = parent;
    while (from <= key.length) {
      let end = key.indexOf(';', from);
      if (end < 0) end = key.length;
      const child: FlameNode = {
        kind: 'frame',
        frame: key.slice(from, end),
        depth: node.depth + 1,
        start: node.start,
        weight: node.weight,
        merged: 1,
        children: noChildren,
      };
      this.keep(node, child);
      node = child;
      from = end + 1;
    }
  }

  private keep(parent: FlameNode, node: FlameNode): void {
    // Most parents keep one child (a stack's own frames below the others' are a chain): a one-element array.
    if (parent.children === noChildren) parent.children = [node];
    else (parent.children as FlameNode[]).push(node);
    this.tree.nodeCount++;
    if (node.depth > this.tree.maxDepth) this.tree.maxDepth = node.depth;
  }

  private keepRun(parent: FlameNode, run: FlameNode | undefined): void {
    if (run && run.merged > 1 && run.weight >= this.minWeight) this.keep(parent, run);
  }
}

/** Calls `visit` on every node, parents before children, children left to right. */
export function walkFlameTree(root: FlameNode, visit: (node: FlameNode) => void): void {
  const pending: FlameNode[] = [root];
  while (pending.length > 0) {
    const node = pending.pop()!;
    visit(node);
    for (let i = node.children.length - 1; i >= 0; i--) pending.push(node.children[i]!);
  }
}

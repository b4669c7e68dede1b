// The merged call tree a flame graph draws, with each frame's place in samples. Takes FoldedStacks, whether to
// reverse them, and the lightest weight worth drawing; gives the tree, children in name order, each child placed
// after its parent's own weight. Runs of adjacent sibling frames each lighter than that are merged into one block,
// so a parent's width still adds up; a lone light frame is left out, and nothing under a light frame is looked at,
// which is what keeps 40 000 deep stacks fast: each stack is split only as deep as its frames are drawn.
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
  children: FlameNode[];
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
  const keys: string[] = [];
  const weights: number[] = [];
  let total = 0;
  for (const [stack, weight] of stacks) {
    if (!(weight > 0)) continue;
    keys.push(options.reverse ? stack.split(';').reverse().join(';') : stack);
    weights.push(weight);
    total += weight;
  }
  const root: FlameNode = { kind: 'root', frame: '', depth: 0, start: 0, weight: total, merged: 1, children: [] };
  const tree: FlameTree = { root, total, maxDepth: 0, nodeCount: 1 };
  if (keys.length > 0) new TreeBuilder(keys, weights, options.minWeight, tree).expand(root, 0, keys.length);
  return tree;
}

// Stacks are numbered; `order` holds those under the node being expanded as one range, which expand() sorts into
// one sub-range per child frame (a bucket pass, no per-child arrays), so memory stays flat however deep it goes.
class TreeBuilder {
  /** Where the next frame of each stack begins; past the end once the stack is used up. */
  private readonly next: Int32Array;
  private readonly order: Int32Array;
  private readonly scratch: Int32Array;
  /** Child group of each stack at the level being expanded; -1 when the stack ends at the parent. */
  private readonly groupOf: Int32Array;

  constructor(
    private readonly keys: readonly string[],
    private readonly weights: readonly number[],
    private readonly minWeight: number,
    private readonly tree: FlameTree,
  ) {
    this.next = new Int32Array(keys.length);
    this.order = Int32Array.from(keys.keys());
    this.scratch = new Int32Array(keys.length);
    this.groupOf = new Int32Array(keys.length);
  }

  expand(parent: FlameNode, lo: number, hi: number): void {
    if (hi - lo === 1) return this.chain(parent, this.order[lo]!);
    const { keys, weights, next, order, groupOf } = this;
    const index = new Map<string, number>();
    const names: string[] = [];
    const groupWeight: number[] = [];
    const groupSize: number[] = [];
    let own = 0;
    let ended = 0;
    for (let k = lo; k < hi; k++) {
      const i = order[k]!;
      const key = keys[i]!;
      const from = next[i]!;
      if (from > key.length) {
        own += weights[i]!;
        groupOf[i] = -1;
        ended++;
        continue;
      }
      let end = key.indexOf(';', from);
      if (end < 0) end = key.length;
      next[i] = end + 1;
      const frame = key.slice(from, end);
      let g = index.get(frame);
      if (g === undefined) {
        g = names.length;
        index.set(frame, g);
        names.push(frame);
        groupWeight.push(0);
        groupSize.push(0);
      }
      groupOf[i] = g;
      groupWeight[g] = groupWeight[g]! + weights[i]!;
      groupSize[g] = groupSize[g]! + 1;
    }
    const sorted = names.map((_, g) => g).sort((a, b) => (names[a]! < names[b]! ? -1 : 1));
    const cursor = new Array<number>(names.length);
    let offset = lo + ended;
    for (const g of sorted) {
      cursor[g] = offset;
      offset += groupSize[g]!;
    }
    for (let k = lo; k < hi; k++) {
      const i = order[k]!;
      const g = groupOf[i]!;
      if (g >= 0) this.scratch[cursor[g]!++] = i;
    }
    order.set(this.scratch.subarray(lo + ended, hi), lo + ended);

    const depth = parent.depth + 1;
    let x = parent.start + own;
    let from = lo + ended;
    let run: FlameNode | undefined;
    for (const g of sorted) {
      const weight = groupWeight[g]!;
      const size = groupSize[g]!;
      if (weight < this.minWeight) {
        if (run) {
          run.weight += weight;
          run.merged++;
        } else run = { kind: 'merged', frame: names[g]!, depth, start: x, weight, merged: 1, children: [] };
      } else {
        this.keepRun(parent, run);
        run = undefined;
        const node: FlameNode = { kind: 'frame', frame: names[g]!, depth, start: x, weight, merged: 1, children: [] };
        this.keep(parent, node);
        this.expand(node, from, from + size);
      }
      x += weight;
      from += size;
    }
    this.keepRun(parent, run);
  }

  /** The rest of one stack under `parent`: a single path, as heavy as `parent`, so every frame is kept. */
  private chain(parent: FlameNode, i: number): void {
    const key = this.keys[i]!;
    let from = this.next[i]!;
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
        children: [],
      };
      this.keep(node, child);
      node = child;
      from = end + 1;
    }
  }

  private keep(parent: FlameNode, node: FlameNode): void {
    parent.children.push(node);
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

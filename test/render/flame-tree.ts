// The frame tree's rows (src/render/flame-layout.ts) as linked nodes, for tests that check its shape: the renderers
// read the rows directly.
import {
  buildFlameColumns,
  frameRow,
  rootRow,
  rowFrame,
  type FlameColumns,
  type FlameTreeOptions,
} from '../../src/render/flame-layout.js';
import type { FoldedStacks } from '../../src/stacks/folded.js';

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

const noChildren: readonly FlameNode[] = Object.freeze([]);

/** Builds the tree of `stacks`; stacks with a weight that is not positive are ignored. */
export function buildFlameTree(stacks: FoldedStacks, options: FlameTreeOptions): FlameTree {
  return toFlameTree(buildFlameColumns(stacks, options));
}

/** The columns as linked nodes: a row's parent is the last row before it one level up. */
function toFlameTree(columns: FlameColumns): FlameTree {
  const path: FlameNode[] = [];
  for (let row = 0; row < columns.count; row++) {
    const kind = columns.kind[row];
    const depth = columns.depth[row]!;
    const node: FlameNode = {
      kind: kind === rootRow ? 'root' : kind === frameRow ? 'frame' : 'merged',
      frame: rowFrame(columns, row),
      depth,
      start: columns.start[row]!,
      weight: columns.weight[row]!,
      merged: columns.merged[row]!,
      children: noChildren,
    };
    if (depth > 0) {
      const parent = path[depth - 1]!;
      if (parent.children === noChildren) parent.children = [node];
      else (parent.children as FlameNode[]).push(node);
    }
    path[depth] = node;
  }
  return { root: path[0]!, total: columns.total, maxDepth: columns.maxDepth, nodeCount: columns.count };
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

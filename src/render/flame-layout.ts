// Where each frame of a flame graph goes, in samples rather than pixels. Takes ordered stacks and the narrowest
// weight worth drawing; gives the frames to draw (depth, start, weight), the root first. Runs of adjacent sibling
// frames each narrower than that are merged into one block, so a parent's width still adds up; a lone narrow frame,
// and everything below a narrow frame, is left out.
import { commonPrefix, type OrderedStacks } from './order.js';

export interface LaidFrame {
  /** 'root' is the whole profile ("all"), 'merged' stands for `merged` narrow adjacent siblings. */
  kind: 'root' | 'frame' | 'merged';
  /** The folded frame text (annotation included) for 'frame'; '' otherwise. */
  frame: string;
  /** 0 for the root, 1 for the outermost frames. */
  depth: number;
  /** Cumulative weight before this frame, in the same unit as the weights. */
  start: number;
  weight: number;
  /** How many frames a 'merged' block stands for; 1 otherwise. */
  merged: number;
}

export interface FlameLayout {
  /** Children before parents (the walk's order), the root last. Deterministic. */
  frames: LaidFrame[];
  total: number;
  /** Deepest depth among the frames drawn. */
  maxDepth: number;
}

interface Run {
  start: number;
  end: number;
  count: number;
}

/** Lays out the frames of `ordered`, skipping or merging frames lighter than `minWeight`. */
export function layoutFlame(ordered: OrderedStacks, minWeight: number): FlameLayout {
  const frames: LaidFrame[] = [];
  const runs: (Run | undefined)[] = [];
  const starts: number[] = [];
  let maxDepth = 0;

  const flush = (depth: number): void => {
    const run = runs[depth];
    if (!run) return;
    runs[depth] = undefined;
    const weight = run.end - run.start;
    if (run.count < 2 || weight < minWeight) return;
    frames.push({ kind: 'merged', frame: '', depth, start: run.start, weight, merged: run.count });
    if (depth > maxDepth) maxDepth = depth;
  };

  const close = (depth: number, frame: string, start: number, end: number): void => {
    flush(depth + 1);
    const weight = end - start;
    if (weight < minWeight) {
      const run = runs[depth];
      if (run && run.end === start) {
        run.end = end;
        run.count++;
      } else {
        flush(depth);
        runs[depth] = { start, end, count: 1 };
      }
      return;
    }
    flush(depth);
    frames.push({ kind: 'frame', frame, depth, start, weight, merged: 1 });
    if (depth > maxDepth) maxDepth = depth;
  };

  let previous: string[] = [];
  let x = 0;
  for (const { frames: stack, weight } of ordered.stacks) {
    const shared = commonPrefix(previous, stack);
    for (let i = previous.length - 1; i >= shared; i--) close(i + 1, previous[i]!, starts[i + 1]!, x);
    for (let i = shared; i < stack.length; i++) starts[i + 1] = x;
    x += weight;
    previous = stack;
  }
  for (let i = previous.length - 1; i >= 0; i--) close(i + 1, previous[i]!, starts[i + 1]!, x);
  flush(1);
  if (x > 0) frames.push({ kind: 'root', frame: '', depth: 0, start: 0, weight: x, merged: 1 });
  return { frames, total: x, maxDepth };
}

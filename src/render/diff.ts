// A differential flame graph: two profiles compared (stacks/diff.ts) drawn in the shape of AFTER, each frame coloured
// by how its weight changed (red grew, blue shrank, deeper for larger changes), its tooltip giving before, after and
// the change in points of the total. Stacks found only in BEFORE are drawn too, at their BEFORE weight, so that code
// that went away shows (in blue). Takes a StackDiff; gives SVG or HTML text, through the same renderers as every
// flame graph (zoom, search, escaping), with the rows' colours and figures their own.
import type { DiffCounts, StackDiff } from '../stacks/diff.js';
import type { FoldedStacks } from '../stacks/folded.js';
import { frameRow, rootRow, type FlameColumns } from './flame-layout.js';
import { renderHtml, type HtmlOptions } from './html.js';
import { diffColor } from './palette.js';
import { formatCount } from './svg-frames.js';
import { renderSvg, type SvgOptions } from './svg.js';

/** The graph's shape: AFTER's weights, and BEFORE's for the stacks AFTER does not have. */
export function diffShape(diff: StackDiff): FoldedStacks {
  const shape: FoldedStacks = new Map();
  for (const [stack, { before, after }] of diff.stacks) shape.set(stack, after > 0 ? after : before);
  return shape;
}

export function renderDiffSvg(diff: StackDiff, options: Partial<SvgOptions> = {}): string {
  const countName = options.countName ?? 'samples';
  return renderSvg(
    diffShape(diff),
    { title: 'Differential Flame Graph', subtitle: subtitleOf(diff), ...options },
    (columns) => {
      const rows = rowWeights(columns, diff, options.reverse ?? false);
      return {
        fill: (row) => (Number.isNaN(rows.after[row]!) ? undefined : diffColor(rows.delta(row), rows.maxAbs)),
        figures: (row) => (Number.isNaN(rows.after[row]!) ? undefined : figures(rows, row, diff, countName)),
      };
    },
  );
}

export function renderDiffHtml(diff: StackDiff, options: Partial<HtmlOptions> = {}): string {
  return renderHtml(
    diffShape(diff),
    { title: 'Differential Flame Graph', subtitle: subtitleOf(diff), ...options },
    (columns) => {
      const rows = rowWeights(columns, diff, options.reverse ?? false);
      return {
        options: {
          beforeTotal: diff.totals.before * diff.scale,
          afterTotal: diff.totals.after,
          scale: diff.scale,
          maxAbs: rows.maxAbs,
        },
        extra: (row) =>
          Number.isNaN(rows.after[row]!) ? '' : `,"b":${round(rows.before[row]!)},"a":${round(rows.after[row]!)}`,
      };
    },
  );
}

function subtitleOf(diff: StackDiff): string {
  const how =
    diff.scale === 1 ? 'raw weights' : `BEFORE scaled ×${diff.scale.toPrecision(3)} to AFTER’s total (shares compared)`;
  return `shape of AFTER; red grew, blue shrank; ${how}`;
}

interface RowWeights {
  before: Float64Array;
  after: Float64Array;
  maxAbs: number;
  delta(row: number): number;
}

/** Each drawn row's weight before (scaled) and after: NaN for blocks standing for several light frames. */
function rowWeights(columns: FlameColumns, diff: StackDiff, reverse: boolean): RowWeights {
  const trie = buildTrie(diff.stacks, reverse);
  const before = new Float64Array(columns.count).fill(Number.NaN);
  const after = new Float64Array(columns.count).fill(Number.NaN);
  const path: (TrieNode | undefined)[] = [];
  let maxAbs = 0;
  for (let row = 0; row < columns.count; row++) {
    const depth = columns.depth[row]!;
    let node: TrieNode | undefined;
    if (columns.kind[row] === rootRow) node = trie;
    else if (columns.kind[row] === frameRow) node = path[depth - 1]?.children?.get(columns.names[columns.name[row]!]!);
    path[depth] = node;
    if (!node) continue;
    before[row] = node.before;
    after[row] = node.after;
    if (columns.kind[row] !== rootRow) maxAbs = Math.max(maxAbs, Math.abs(node.after - node.before));
  }
  return { before, after, maxAbs, delta: (row) => after[row]! - before[row]! };
}

interface TrieNode extends DiffCounts {
  children?: Map<string, TrieNode>;
}

function buildTrie(stacks: ReadonlyMap<string, DiffCounts>, reverse: boolean): TrieNode {
  const root: TrieNode = { before: 0, after: 0 };
  for (const [stack, counts] of stacks) {
    const frames = stack.split(';');
    if (reverse) frames.reverse();
    root.before += counts.before;
    root.after += counts.after;
    let node = root;
    for (const frame of frames) {
      node.children ??= new Map();
      let child = node.children.get(frame);
      if (!child) node.children.set(frame, (child = { before: 0, after: 0 }));
      child.before += counts.before;
      child.after += counts.after;
      node = child;
    }
  }
  return root;
}

/** `before 120 samples (4.00%), after 300 (10.00%), +6.00 pts` */
function figures(rows: RowWeights, row: number, diff: StackDiff, countName: string): string {
  const before = rows.before[row]!;
  const after = rows.after[row]!;
  const beforeShare = share(before, diff.totals.before * diff.scale);
  const afterShare = share(after, diff.totals.after);
  const points = afterShare - beforeShare;
  const sign = points > 0 ? '+' : points < 0 ? '−' : '±';
  return (
    `before ${formatCount(round(before / diff.scale))} ${countName} (${beforeShare.toFixed(2)}%), ` +
    `after ${formatCount(round(after))} (${afterShare.toFixed(2)}%), ${sign}${Math.abs(points).toFixed(2)} pts`
  );
}

function share(weight: number, total: number): number {
  return total > 0 ? (100 * weight) / total : 0;
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}

// The folded-stack format, the only thing between folding and rendering: one line per distinct stack,
// `root;child;leaf COUNT`, root first. Frame annotations follow flamegraph.pl's java palette: a frame ending in
// `_[j]` is managed (JIT or ReadyToRun), `_[k]` kernel, `_[i]` inlined; anything else is native or unknown.

/** Distinct stacks (frames joined by `;`, root first) to their weight (samples, or summed periods). */
export type FoldedStacks = Map<string, number>;

export type FrameAnnotation = 'j' | 'k' | 'i';

const annotationPattern = /_\[([jki])\]$/;

/** Splits `name_[j]` into the bare name and its annotation. */
export function splitAnnotation(frame: string): { name: string; annotation: FrameAnnotation | undefined } {
  const match = annotationPattern.exec(frame);
  if (!match) return { name: frame, annotation: undefined };
  return { name: frame.slice(0, -4), annotation: match[1] as FrameAnnotation };
}

/** Adds `count` to a stack's weight. */
export function addStack(stacks: FoldedStacks, stack: string, count: number): void {
  stacks.set(stack, (stacks.get(stack) ?? 0) + count);
}

/** Folded lines sorted by stack (byte order, as `sort` with LC_ALL=C does), each ending in a newline. */
export function* formatFolded(stacks: FoldedStacks): Generator<string> {
  for (const key of sortedStacks(stacks)) yield `${key} ${formatCount(stacks.get(key)!)}\n`;
}

/**
 * The same stacks in a map iterated in sorted order (UTF-16, the default sort's). formatFolded and each renderer sort
 * the keys they take; given this map, each of those sorts is one pass over keys already in order.
 */
export function inSortedOrder(stacks: FoldedStacks): FoldedStacks {
  const keys = [...stacks.keys()].sort();
  return new Map(keys.map((key) => [key, stacks.get(key)!]));
}

/** The stacks in UTF-8 byte order. */
function sortedStacks(stacks: FoldedStacks): string[] {
  const keys = [...stacks.keys()];
  // UTF-16 order (the default sort) equals UTF-8 byte order unless a text holds surrogates or U+E000..U+FFFF.
  if (!keys.some((key) => wideChar.test(key))) return keys.sort();
  const bytes = new Map(keys.map((key) => [key, Buffer.from(key)]));
  return keys.sort((a, b) => Buffer.compare(bytes.get(a)!, bytes.get(b)!));
}

const wideChar = /[\ud800-\uffff]/;

function formatCount(n: number): string {
  return Number.isInteger(n) ? String(n) : String(Math.round(n * 1e6) / 1e6);
}

export interface ParseFoldedResult {
  stacks: FoldedStacks;
  /** Lines that were not `stack count` (blank lines are not counted). */
  skipped: number;
}

/** Parses folded text. Tolerant: a line without a numeric last field is counted in `skipped`. */
export async function parseFolded(lines: AsyncIterable<string> | Iterable<string>): Promise<ParseFoldedResult> {
  const result: ParseFoldedResult = { stacks: new Map(), skipped: 0 };
  for await (const line of lines) addFoldedLine(result, line);
  return result;
}

/** Parses folded text held in one string. */
export function parseFoldedText(text: string): ParseFoldedResult {
  const result: ParseFoldedResult = { stacks: new Map(), skipped: 0 };
  for (const line of text.split('\n')) addFoldedLine(result, line);
  return result;
}

function addFoldedLine(result: ParseFoldedResult, raw: string): void {
  const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
  if (line.trim() === '') return;
  const space = line.lastIndexOf(' ');
  const count = space > 0 ? Number(line.slice(space + 1)) : NaN;
  if (!Number.isFinite(count) || count < 0) result.skipped++;
  else addStack(result.stacks, line.slice(0, space), count);
}

// Function symbols in columns, for tables of a hundred thousand symbols (/usr/bin/node's .symtab, kallsyms) that are
// read at every postprocess and asked a few thousand questions: starts and ends as doubles (relative to a base, so
// kernel addresses fit), bindings as bytes, names as row numbers a caller's `name` function turns into text on first
// use. perf's fixes (symbols__fixup_duplicate, symbols__fixup_end), as sortedAsPerf/lookupTable in function-table.ts do them on
// objects (which stay for anything these columns cannot hold), run here with the same rules and ties, but late: the
// symbols are sorted once, and the symbols at one address are reduced to the one perf prefers when a lookup lands on
// that address, because perf's choice may compare demangled names, and demangling every alias of a C++ library costs
// more than the rest of the table.
import { perfPrefers, type Contender, type FunctionTable } from './function-table.js';

/**
 * Every start and end a row holds is below this (the caller checks): the sum of two of them stays an exact double.
 * A file with a value at or above it (a forged one) is read into the bigint tables instead.
 */
export const maxColumnValue = 2 ** 52;

/** Symbols in the order they were read (their row numbers), before perf's fixes. Appending only. */
export class FunctionRows {
  count = 0;
  readonly starts: Float64Array;
  readonly ends: Float64Array;
  readonly bindings: Uint8Array;

  constructor(capacity: number) {
    this.starts = new Float64Array(capacity);
    this.ends = new Float64Array(capacity);
    this.bindings = new Uint8Array(capacity);
  }

  /** Adds a row and returns its number: start and end below maxColumnValue, start <= end. */
  push(start: number, end: number, binding: number): number {
    const row = this.count++;
    this.starts[row] = start;
    this.ends[row] = end;
    this.bindings[row] = binding;
    return row;
  }
}

/** The name of row `row`; called at most once per row (the table remembers it). */
export type RowName = (row: number) => string;

export interface ColumnTableOptions {
  /** Rows [0, functions) get perf's fixes; rows after them are added as they are (perf's PLT entries). */
  functions: number;
  /** Addresses are `base` plus a row's start (kallsyms: the lowest address). */
  base?: bigint;
  /** Ends fixed before duplicates are reduced (perf's order for kallsyms: of one address, the last listed wins). */
  endsFirst?: boolean;
  /**
   * With endsFirst (kallsyms): a number per row (0 for the kernel's own symbols, another for a module's; see
   * kallsyms.ts). A row of size 0 followed by a row of another number ends a page past its page rather than at the
   * next row, as perf's symbols__fixup_end leaves the gap between the kernel and its modules to no symbol.
   */
  groups?: Uint8Array | Uint32Array;
}

/** Rows `rows` ordered by start, rows of one start in the order given (a stable sort). */
function byStart(starts: Float64Array, rows: Uint32Array): Uint32Array {
  const count = rows.length;
  let ordered = 1;
  while (ordered < count && starts[rows[ordered - 1]!]! <= starts[rows[ordered]!]!) ordered++;
  if (ordered >= count) return rows;
  const order = new Uint32Array(count);
  const bits = count <= 1 ? 1 : 32 - Math.clz32(count - 1);
  const scale = 2 ** bits;
  let max = 0;
  for (let i = 0; i < count; i++) if (starts[rows[i]!]! > max) max = starts[rows[i]!]!;
  if (max < 2 ** (53 - bits)) {
    // Start and position in one exact double: a native numeric sort, ties in position order.
    const keys = new Float64Array(count);
    for (let i = 0; i < count; i++) keys[i] = starts[rows[i]!]! * scale + i;
    keys.sort();
    for (let i = 0; i < count; i++) order[i] = rows[keys[i]! % scale]!;
    return order;
  }
  const positions = Array.from({ length: count }, (_, i) => i);
  positions.sort((a, b) => starts[rows[a]!]! - starts[rows[b]!]! || a - b);
  for (let i = 0; i < count; i++) order[i] = rows[positions[i]!]!;
  return order;
}

function rowsFrom(from: number, to: number): Uint32Array {
  const rows = new Uint32Array(to - from);
  for (let i = 0; i < rows.length; i++) rows[i] = from + i;
  return rows;
}

/**
 * A FunctionTable over `rows` as sortedAsPerf and lookupTable of function-table.ts would build it from the same symbols as
 * objects: one entry per address (a group of rows, its winner chosen on first lookup) and then the added rows.
 */
export function columnTable(rows: FunctionRows, name: RowName, options: ColumnTableOptions): FunctionTable {
  const { functions, base = 0n } = options;
  const { starts, ends } = rows;
  const groups = new StartGroups(rows, rememberedNames(name), options);
  const nameOf = groups.nameOf;
  const added = byStart(starts, rowsFrom(functions, rows.count));
  const { entries, entryStarts } = mergedEntries(groups, starts, added);
  // An entry's row, end and label (an added row is never a label).
  const entryRow = (i: number) => (entries[i]! >= 0 ? groups.resolve(entries[i]!) : ~entries[i]!);
  const entryEnd = (i: number) => (entries[i]! >= 0 ? groups.groupEnd[entries[i]!]! : ends[~entries[i]!]!);
  const entryLabel = (i: number) => entries[i]! >= 0 && groups.groupLabel[entries[i]!] === 1;
  const hit = (i: number, offset: number) => {
    const row = entryRow(i);
    return { name: nameOf(row), offset: BigInt(offset - starts[row]!) };
  };
  // Ends can pass maxColumnValue by a page (pageAfter): doubles stay exact up to here.
  const limit = 2n ** 53n;
  return {
    size: entries.length,
    lookup(address) {
      const relative = address - base;
      if (relative < 0n || relative >= limit) return undefined;
      const offset = Number(relative);
      const found = lastAtOrBefore(entryStarts, offset);
      if (found < 0) return undefined;
      entryRow(found);
      if (offset >= entryEnd(found)) return undefined;
      // A label inside a sized function: perf's tree search meets the function first and names the frame by it.
      if (entryLabel(found))
        for (let i = found - 1; i >= 0 && i >= found - 16; i--) {
          entryRow(i);
          if (!entryLabel(i) && entryStarts[i]! <= offset && offset < entryEnd(i)) return hit(i, offset);
        }
      return hit(found, offset);
    },
  };
}

/** `name` asked once per row, its answers kept. */
function rememberedNames(name: RowName): RowName {
  const known = new Map<number, string>();
  return (row: number) => {
    let text = known.get(row);
    if (text === undefined) known.set(row, (text = name(row)));
    return text;
  };
}

/**
 * The function rows sorted by start and grouped by it, each group reduced to the row perf prefers on first lookup
 * (resolve), with the end and label that row has after perf's fixes.
 */
class StartGroups {
  private readonly starts: Float64Array;
  private readonly ends: Float64Array;
  private readonly bindings: Uint8Array;
  private readonly functions: number;
  private readonly base: bigint;
  private readonly endsFirst: boolean;
  private readonly rowGroups: Uint8Array | Uint32Array | undefined;
  private readonly sorted: Uint32Array;
  // Groups: the sorted positions [first[g], first[g + 1]) share one start.
  private readonly first: Uint32Array;
  readonly groupStarts: Float64Array;
  readonly count: number;
  // Each group's winner (-1: not chosen yet), and its end and label after the fixes.
  private readonly winner: Int32Array;
  readonly groupEnd: Float64Array;
  readonly groupLabel: Uint8Array;

  constructor(
    rows: FunctionRows,
    readonly nameOf: RowName,
    options: ColumnTableOptions,
  ) {
    this.starts = rows.starts;
    this.ends = rows.ends;
    this.bindings = rows.bindings;
    this.functions = options.functions;
    this.base = options.base ?? 0n;
    this.endsFirst = options.endsFirst ?? false;
    this.rowGroups = options.groups;
    this.sorted = byStart(this.starts, rowsFrom(0, this.functions));
    const runs = startRuns(this.starts, this.sorted);
    this.first = runs.first;
    this.groupStarts = runs.groupStarts;
    this.count = runs.count;
    this.winner = new Int32Array(this.count).fill(-1);
    this.groupEnd = new Float64Array(this.count);
    this.groupLabel = new Uint8Array(this.count);
  }

  /** The row group `g` is named by, chosen (and its end and label set) on first call. */
  resolve(g: number): number {
    const { winner, first, groupStarts, count } = this;
    if (winner[g]! >= 0) return winner[g]!;
    let kept = first[g]!;
    const last = g + 1 < count ? first[g + 1]! : this.functions;
    for (let p = kept + 1; p < last; p++) if (this.prefer(p, kept)) kept = p;
    const start = this.starts[this.sorted[kept]!]!;
    let end = this.endAt(kept);
    let label = this.labelAt(kept);
    if (end === start) {
      if (g + 1 < count) {
        end = groupStarts[g + 1]!;
        label = true;
      } else end = this.pageAfter(start);
    }
    this.groupEnd[g] = end;
    this.groupLabel[g] = label ? 1 : 0;
    return (winner[g] = this.sorted[kept]!);
  }

  /** perf's choice between sorted positions of one group: true when `a` wins over `b`. */
  private prefer(a: number, b: number): boolean {
    return perfPrefers(this.contender(a), this.contender(b));
  }

  private contender(p: number): Contender {
    const row = this.sorted[p]!;
    return { sized: this.endAt(p) > this.starts[row]!, binding: this.bindings[row]!, name: () => this.nameOf(row) };
  }

  // A sorted row's end and label as duplicates are reduced: with endsFirst, a row of size 0 ends where the next
  // sorted row begins (at its own start when that row shares it), or a page past its page when it is the last or the
  // next is of another group.
  private boundaryAt(p: number): boolean {
    const { sorted, rowGroups } = this;
    return p + 1 >= this.functions || (rowGroups !== undefined && rowGroups[sorted[p]!] !== rowGroups[sorted[p + 1]!]);
  }

  private endAt(p: number): number {
    const { starts, ends, sorted } = this;
    const row = sorted[p]!;
    if (!this.endsFirst || ends[row] !== starts[row]) return ends[row]!;
    return this.boundaryAt(p) ? this.pageAfter(starts[row]!) : starts[sorted[p + 1]!]!;
  }

  private labelAt(p: number): boolean {
    const { starts, ends, sorted } = this;
    return this.endsFirst && ends[sorted[p]!] === starts[sorted[p]!] && !this.boundaryAt(p);
  }

  private pageAfter(start: number): number {
    const address = this.base + BigInt(start);
    return Number(((address + 4095n) / 4096n) * 4096n + 4096n - this.base);
  }
}

/** Where each run of one start begins among the `sorted` rows, and that start; the number of runs. */
function startRuns(
  starts: Float64Array,
  sorted: Uint32Array,
): { first: Uint32Array; groupStarts: Float64Array; count: number } {
  const functions = sorted.length;
  const first = new Uint32Array(functions);
  const groupStarts = new Float64Array(functions);
  let groups = 0;
  for (let p = 0, previous = -1; p < functions; p++) {
    const start = starts[sorted[p]!]!;
    if (start === previous) continue;
    first[groups] = p;
    groupStarts[groups++] = previous = start;
  }
  return { first, groupStarts, count: groups };
}

/** Entries: groups then added rows (encoded ~row), by start, a group before an added row of the same start. */
function mergedEntries(
  groups: StartGroups,
  starts: Float64Array,
  added: Uint32Array,
): { entries: Int32Array; entryStarts: Float64Array } {
  const { groupStarts, count } = groups;
  const entries = new Int32Array(count + added.length);
  const entryStarts = new Float64Array(entries.length);
  for (let i = 0, g = 0, a = 0; i < entries.length; i++)
    if (a >= added.length || (g < count && groupStarts[g]! <= starts[added[a]!]!)) {
      entryStarts[i] = groupStarts[g]!;
      entries[i] = g++;
    } else {
      entryStarts[i] = starts[added[a]!]!;
      entries[i] = ~added[a++]!;
    }
  return { entries, entryStarts };
}

/** The last position of `starts` (ascending) at or before `offset`; -1 when there is none. */
function lastAtOrBefore(starts: Float64Array, offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]! <= offset) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

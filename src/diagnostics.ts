// How stages report what they skipped or worked around without printing: a Warn callback passed in options, and
// a counter that warns once per kind and keeps the totals for the manifest.

export type Warn = (message: string) => void;

export const ignoreWarnings: Warn = () => {};

/** Counts events by kind; calls `warn` the first time each kind is seen. */
export class SkipCounter {
  readonly counts = new Map<string, number>();
  constructor(private readonly warn: Warn = ignoreWarnings) {}

  add(kind: string, firstMessage?: string): void {
    const n = this.counts.get(kind) ?? 0;
    if (n === 0) this.warn(firstMessage ?? kind);
    this.counts.set(kind, n + 1);
  }

  total(): number {
    let sum = 0;
    for (const n of this.counts.values()) sum += n;
    return sum;
  }

  toJSON(): Record<string, number> {
    return sumCounts([this.counts]);
  }
}

/** Counts by kind summed over `sources`, kinds sorted: the one shape skip counts take in results and manifests. */
export function sumCounts(sources: Iterable<Iterable<readonly [string, number]>>): Record<string, number> {
  const sum = new Map<string, number>();
  for (const source of sources) for (const [kind, n] of source) sum.set(kind, (sum.get(kind) ?? 0) + n);
  return Object.fromEntries([...sum].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
}

/** 12345 → `12 345`: counts as messages print them, in groups of three digits. */
export function groupDigits(n: number): string {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ' ');
}

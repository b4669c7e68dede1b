// What the ReadyToRun tests share: finding the code block an RVA lies in, and a seeded generator for hostile cases.
import type { ReadyToRunMethod, ReadyToRunNames } from '../../../src/dotnet/readytorun/readytorun.js';

/** The code block holding `rva`, by binary search over the sorted blocks. */
export function lookup(names: ReadyToRunNames, rva: number): ReadyToRunMethod | undefined {
  let low = 0;
  let high = names.methods.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const m = names.methods[mid]!;
    if (rva < m.start) high = mid - 1;
    else if (rva >= m.end) low = mid + 1;
    else return m;
  }
  return undefined;
}

/** A small seeded generator, so a failing case can be replayed. */
export function random(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 2 ** 32;
  };
}

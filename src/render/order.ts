// The order every renderer walks stacks in. Takes FoldedStacks; gives each stack's frames (root first, or leaf
// first when reversed) sorted so that stacks sharing a prefix of frames are adjacent, and the total weight. Walking
// that list and comparing neighbours yields the merged call tree without building one.
import type { FoldedStacks } from '../stacks/folded.js';

export interface OrderedStack {
  frames: string[];
  weight: number;
}

export interface OrderedStacks {
  stacks: OrderedStack[];
  /** Sum of all weights. */
  total: number;
}

/**
 * Stacks with a positive weight, sorted by frames. Sorting the text with a `;` appended to every stack keeps each
 * group of stacks that share a prefix contiguous (a parent's own weight sorts first, before its callees).
 */
export function orderStacks(stacks: FoldedStacks, reverse = false): OrderedStacks {
  const keyed: { key: string; weight: number }[] = [];
  let total = 0;
  for (const [stack, weight] of stacks) {
    if (!(weight > 0)) continue;
    const key = reverse ? stack.split(';').reverse().join(';') : stack;
    keyed.push({ key: `${key};`, weight });
    total += weight;
  }
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const ordered: OrderedStack[] = new Array<OrderedStack>(keyed.length);
  for (let i = 0; i < keyed.length; i++) {
    const { key, weight } = keyed[i]!;
    ordered[i] = { frames: key.slice(0, -1).split(';'), weight };
  }
  return { stacks: ordered, total };
}

/** Number of leading frames two stacks share. */
export function commonPrefix(a: readonly string[], b: readonly string[]): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

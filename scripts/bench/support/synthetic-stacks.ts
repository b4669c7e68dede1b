// Synthetic folded stacks for the render benchmarks: `stackCount` distinct stacks, 20 to 60 frames deep, sharing
// prefixes the way real profiles do, with .NET-like names and heavy-tailed counts. Deterministic (seeded).
import type { FoldedStacks } from '../../../src/stacks/folded.js';

/** A small deterministic PRNG (mulberry32), so every run renders the same profile. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function syntheticStacks(stackCount: number): FoldedStacks {
  const next = random(42);
  const pick = <T>(items: readonly T[]): T => items[Math.floor(next() * items.length)]!;
  const namespaces = [
    'System.Text.Json',
    'System.Collections.Generic',
    'Microsoft.AspNetCore.Routing',
    'Contoso.Orders',
  ];
  const names: string[] = [];
  for (let i = 0; i < 4000; i++) {
    const kind = next();
    if (kind < 0.6) names.push(`${pick(namespaces)}.Type${i % 97}::Method${i}(System.Int32, System.String)_[j]`);
    else if (kind < 0.8) names.push(`native_function_${i}`);
    else if (kind < 0.95) names.push(`kernel_fn_${i}_[k]`);
    else names.push(`[lib${i % 13}.so]`);
  }
  const stacks: FoldedStacks = new Map();
  let previous: string[] = ['dotnet', '[libcoreclr.so]'];
  while (stacks.size < stackCount) {
    const depth = 20 + Math.floor(next() * 41);
    const keep = Math.min(depth - 1, Math.floor(next() * previous.length));
    const frames = previous.slice(0, Math.max(2, keep));
    while (frames.length < depth) frames.push(pick(names));
    // Heavy-tailed like real profiles: most distinct stacks seen once or twice, a few thousands of times.
    stacks.set(frames.join(';'), Math.min(20_000, Math.floor(1 / (1 - next()) ** (1 / 1.2))));
    previous = frames;
  }
  return stacks;
}

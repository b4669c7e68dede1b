// Render benchmark: 40 000 distinct stacks, 20 to 60 frames deep, sharing prefixes the way real profiles do,
// with .NET-like names. Prints the time of each format (best and median of a few runs, wall clock and this
// process's CPU time, which a busy machine inflates less), the output size and the peak RSS. Never asserted.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { render, renderFormats, type RenderFormat } from '../../src/render/index.js';
import type { FoldedStacks } from '../../src/stacks/folded.js';

const stackCount = 40_000;
const runs = 5;

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

function makeStacks(): FoldedStacks {
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

const stacks = makeStacks();
let frames = 0;
for (const key of stacks.keys()) frames += key.split(';').length;
console.log(`${stacks.size} distinct stacks, ${frames} frames in all; load average ${loadavg()[0]!.toFixed(1)}`);
for (const format of renderFormats) time(format);
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);

function time(format: RenderFormat): void {
  const wall: number[] = [];
  const cpu: number[] = [];
  let bytes = 0;
  try {
    for (let i = 0; i < runs; i++) {
      const start = performance.now();
      const startCpu = process.cpuUsage();
      bytes = Buffer.byteLength(render(format, stacks));
      const used = process.cpuUsage(startCpu);
      wall.push((performance.now() - start) / 1000);
      cpu.push((used.user + used.system) / 1e6);
    }
  } catch (error) {
    console.log(`${format.padEnd(10)} skipped: ${(error as Error).message}`);
    return;
  }
  console.log(`${format.padEnd(10)} wall ${summary(wall)}; cpu ${summary(cpu)}; ${(bytes / 1e6).toFixed(1)} MB`);
}

function summary(seconds: number[]): string {
  const sorted = [...seconds].sort((a, b) => a - b);
  return `best ${sorted[0]!.toFixed(3)} s, median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(3)} s`;
}

// Render benchmark: 40 000 distinct stacks, 20 to 60 frames deep, sharing prefixes the way real profiles do,
// with .NET-like names. Prints the time of each format (best and median of a few runs, wall clock and this
// process's CPU time, which a busy machine inflates less), the output size and the peak RSS. Never asserted.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { render, renderFormats, type RenderFormat } from '../../src/render/index.js';
import { syntheticStacks } from './support/synthetic-stacks.js';

const stackCount = 40_000;
const runs = 5;

const stacks = syntheticStacks(stackCount);
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

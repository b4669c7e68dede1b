// pprof benchmark: the bytes and write time of profile.pb.gz (encode and gzip) for 10 000 and 100 000 samples, as
// a real recording folds them (samples share stacks) and at the worst case (every sample its own stack, 20 to 60
// frames deep, synthetic); the worst case again with every unnamed native frame (`[libN.so]`) at an address of its
// own, up to the fold's bound of distinct addresses, each placed in a mapping as the pprof of a folder is; then any
// folded stacks given with --folded FILE. Best and median of 5 runs. Never asserted.
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { encodePprof, renderPprof, type PprofOptions } from '../../src/render/pprof.js';
import { formatFolded, parseFoldedText, type FoldedStacks } from '../../src/stacks/folded.js';
import { maxAddressedFrames, type AddressedStack } from '../../src/stacks/stack-table.js';
import { syntheticStacks } from './support/synthetic-stacks.js';

const runs = 5;
const { values } = parseArgs({ options: { folded: { type: 'string', multiple: true } } });

console.log(`load average ${loadavg()[0]!.toFixed(1)}`);
for (const samples of [10_000, 100_000]) {
  // A real profile's shape: the synthetic stacks' heavy-tailed counts, cut to this many samples in all.
  const shared = limitSamples(syntheticStacks(samples), samples);
  measure(`${samples} samples, shared stacks`, shared);
  const distinct = new Map([...syntheticStacks(samples).keys()].map((key) => [key, 1]));
  measure(`${samples} samples, all distinct`, distinct);
}
measure('100000 samples, distinct, addressed', ...addressedCase(100_000));
for (const file of values.folded ?? []) measure(file, parseFoldedText(readFileSync(file, 'utf8')).stacks);
console.log(`peak RSS ${(process.resourceUsage().maxRSS / 1024).toFixed(0)} MB`);

function limitSamples(stacks: FoldedStacks, total: number): FoldedStacks {
  const limited: FoldedStacks = new Map();
  let left = total;
  for (const [stack, count] of stacks) {
    if (left <= 0) break;
    const n = Math.min(count, left);
    limited.set(stack, n);
    left -= n;
  }
  return limited;
}

/** Every sample its own stack, each unnamed native frame at an address (maxAddressedFrames of them in all). */
function addressedCase(samples: number): [FoldedStacks, Partial<PprofOptions>] {
  const stacks = new Map([...syntheticStacks(samples).keys()].map((key) => [key, 1]));
  const addressed: AddressedStack[] = [];
  const frameFiles = new Map<string, string>();
  let next = 0;
  for (const stack of stacks.keys()) {
    const frames = stack.split(';');
    const addresses = frames.map((frame) => {
      if (!/^\[lib.*\.so\]$/.test(frame)) return undefined;
      frameFiles.set(frame, frame.slice(1, -1));
      return (0x1000 + (next++ % maxAddressedFrames)).toString(16);
    });
    addressed.push({ stack, addresses, weight: 1 });
  }
  const range = { start: 0x7f0000000000n, limit: 0x7f0001000000n, offset: 0n };
  const locate = (file: string, ip: string) => ({
    path: `/usr/lib/${file}`,
    range,
    address: range.start + BigInt(`0x${ip}`),
  });
  return [stacks, { addressed, frameFiles, locate }];
}

function measure(label: string, stacks: FoldedStacks, options: Partial<PprofOptions> = {}): void {
  let samples = 0;
  for (const n of stacks.values()) samples += n;
  const wall: number[] = [];
  let bytes = 0;
  for (let i = 0; i < runs; i++) {
    const start = performance.now();
    bytes = renderPprof(stacks, options).length;
    wall.push((performance.now() - start) / 1000);
  }
  const raw = encodePprof(stacks, options).length;
  const folded = [...formatFolded(stacks)].join('').length;
  const sorted = wall.sort((a, b) => a - b);
  console.log(
    `${label.padEnd(36)} ${String(samples).padStart(7)} samples ${String(stacks.size).padStart(7)} stacks: ` +
      `write best ${sorted[0]!.toFixed(3)} s, median ${sorted[Math.floor(runs / 2)]!.toFixed(3)} s; ` +
      `${(bytes / 1e6).toFixed(2)} MB gzipped (${(raw / 1e6).toFixed(2)} MB raw; folded text ${(folded / 1e6).toFixed(2)} MB)`,
  );
}

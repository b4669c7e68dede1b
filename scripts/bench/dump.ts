// `npm run bench dump`: `profcpu dump` of the .NET fixture app (test/fixtures/dotnet-app, all workloads running), each
// type PROFCPU_BENCH_DUMP_RUNS times (default 3), by the built CLI as root on this machine (the same path through
// /proc/PID/root as from a sidecar). Prints, per type, the dump's size, the time the runtime took to write it (its
// createdump), the copy's time and throughput (read from the target's file system, SHA-256, written to the output
// folder), and the command's wall time: minimum, median and maximum over the runs. Never asserted: read the figures.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { DumpManifest } from '../../src/dump/dump-manifest.js';
import { startDotnetApp } from '../../test/support/dotnet-app.js';

const cli = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));
const runs = Number(process.env['PROFCPU_BENCH_DUMP_RUNS'] ?? 3);
const types = ['mini', 'triage', 'heap', 'full'] as const;

function spread(values: number[], digits = 0): string {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const f = (v: number) => v.toFixed(digits);
  return `${f(median)} (${f(sorted[0]!)}–${f(sorted.at(-1)!)})`;
}

const app = await startDotnetApp();
const out = mkdtempSync('/var/tmp/profcpu-bench-dump-');
try {
  // Every workload warmed up and running.
  await new Promise((resolve) => setTimeout(resolve, 3000));
  console.log(`fixture pid ${app.pid}, ${runs} runs per type, load average ${loadavg()[0]!.toFixed(2)} at start`);
  console.log('type     size MiB        runtime writes, s   copy, s            copy MiB/s         command wall, s');
  for (const type of types) {
    const sizes: number[] = [];
    const dumps: number[] = [];
    const copies: number[] = [];
    const rates: number[] = [];
    const walls: number[] = [];
    for (let i = 0; i < runs; i++) {
      const dir = join(out, `${type}-${i}`);
      const started = performance.now();
      const run = spawnSync(
        process.execPath,
        [cli, 'dump', '--pid', String(app.pid), '--type', type, '--output', dir, '--quiet'],
        {
          encoding: 'utf8',
        },
      );
      walls.push((performance.now() - started) / 1000);
      if (run.status !== 0) throw new Error(`dump ${type} failed:\n${run.stderr}`);
      const entry = (JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as DumpManifest).dumps[0]!;
      sizes.push(entry.bytes / 1024 ** 2);
      dumps.push(entry.durationsMs.dump / 1000);
      copies.push(entry.durationsMs.copy / 1000);
      rates.push(entry.bytes / 1024 ** 2 / Math.max(entry.durationsMs.copy / 1000, 0.001));
      rmSync(dir, { recursive: true, force: true });
    }
    console.log(
      `${type.padEnd(8)} ${spread(sizes, 1).padEnd(15)} ${spread(dumps, 2).padEnd(19)} ${spread(copies, 2).padEnd(18)} ${spread(rates).padEnd(18)} ${spread(walls, 2)}`,
    );
  }
} finally {
  await app.kill();
  rmSync(out, { recursive: true, force: true });
}

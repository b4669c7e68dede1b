// The .NET collect-folder benchmark (issue 24's figures): `profcpu collect` of the .NET fixture app at 999 Hz
// (bench-out/dotnet-<N>k, made once: about 1 700 samples a second on 2 CPUs, so 15 s for 25k), then, five runs each,
// `profcpu postprocess -dir <folder>` as a user runs it (default engine, every output and prof.tar.gz), `perf script`
// alone on the folder (what the original shell tool runs, its text to /dev/null), and the original tool's whole
// pipeline, `perf script | stackcollapse-perf.pl | flamegraph.pl > flamegraph.svg`, when
// PROFCPU_BENCH_FLAMEGRAPH names a folder holding those two scripts (brendangregg/FlameGraph; not shipped). Prints
// wall seconds (median, min-max), CPU seconds and peak RSS, and postprocess's time over each. Needs root, perf and
// the .NET SDK. `PROFCPU_BENCH_SECONDS=15,60` chooses the recordings' lengths. Never asserted: read the figures.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDotnetApp } from '../../test/support/dotnet-app.js';
import { benchNodeEnv, describeNodeEnv } from './support/node-env.js';
import { summary, type Run } from './support/runs.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = process.env['PROFCPU_BENCH_CLI'] ?? `${root}dist/cli/main.js`;
const lengths = (process.env['PROFCPU_BENCH_SECONDS'] ?? '15,60').split(',').map(Number);
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 5);
const flamegraph = process.env['PROFCPU_BENCH_FLAMEGRAPH'];

/** `sh -c script` under /usr/bin/time, in `cwd`. */
function timed(script: string, cwd: string): Run {
  const start = performance.now();
  const result = spawnSync('/usr/bin/time', ['-f', 'maxrss %M cpu %U %S', 'sh', '-c', script], {
    cwd,
    stdio: ['ignore', 'ignore', 'pipe'],
    env: benchNodeEnv,
  });
  const seconds = (performance.now() - start) / 1000;
  const stderr = result.stderr?.toString() ?? '';
  if (result.status !== 0) throw new Error(`${script} failed: ${stderr.trim().slice(-300)}`);
  const usage = /maxrss (\d+) cpu ([\d.]+) ([\d.]+)\s*$/.exec(stderr)!;
  return { seconds, cpuSeconds: Number(usage[2]) + Number(usage[3]), peakMiB: Number(usage[1]) / 1024 };
}

async function folder(seconds: number): Promise<string> {
  const dir = join(root, 'bench-out', `dotnet-${seconds}s`);
  if (existsSync(join(dir, 'manifest.json'))) return dir;
  rmSync(dir, { recursive: true, force: true });
  const app = await startDotnetApp({ seconds: seconds + 30 });
  try {
    const collect = spawnSync(
      process.execPath,
      [cli, 'collect', '--pid', String(app.pid), '--duration', String(seconds), '--frequency', '999', '--output', dir],
      { stdio: ['ignore', 'ignore', 'pipe'], env: benchNodeEnv },
    );
    if (collect.status !== 0) throw new Error(`collect failed: ${collect.stderr.toString().slice(-500)}`);
  } finally {
    await app.kill();
  }
  return dir;
}

describeNodeEnv();
if (!flamegraph)
  console.log(
    'PROFCPU_BENCH_FLAMEGRAPH is not set: the original pipeline (stackcollapse-perf.pl | flamegraph.pl) is left out',
  );
for (const seconds of lengths) {
  const dir = await folder(seconds);
  const samples = (JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as { samples: { parsed: number } })
    .samples.parsed;
  console.log(`\n.NET fixture, profcpu collect at 999 Hz for ${seconds} s: ${samples} samples (${dir})`);
  const time = (label: string, script: string) =>
    summary(
      label,
      Array.from({ length: runs }, () => timed(script, dir)),
      40,
    );
  const postprocess = time(
    'profcpu postprocess',
    `"${process.execPath}" "${cli}" postprocess -dir . -q >/dev/null 2>&1`,
  );
  const perfScript = time('perf script alone', 'perf script -i perf.data --no-inline >/dev/null 2>&1');
  const ratios = [`postprocess / perf script ${(postprocess / perfScript).toFixed(2)}`];
  if (flamegraph) {
    const pipeline = time(
      'perf script | stackcollapse | flamegraph',
      `perf script -i perf.data --no-inline 2>/dev/null | "${flamegraph}/stackcollapse-perf.pl" | ` +
        `"${flamegraph}/flamegraph.pl" > /tmp/profcpu-bench-pipeline.svg`,
    );
    ratios.unshift(`postprocess / pipeline ${(postprocess / pipeline).toFixed(2)}`);
  }
  console.log(`  ratios: ${ratios.join(', ')}`);
}

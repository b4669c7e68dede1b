// `npm run bench stubs`: what reading the .NET runtime's stubs from its memory costs and what it names.
// - PROFCPU_BENCH_PID=<pid> (a running .NET 8+ process, e.g. the ASP.NET app of scripts/bench/aspnet-app under wrk):
//   reads its stub table PROFCPU_BENCH_RUNS times (default 5) and prints time, bytes and reads per run (min, median,
//   max) and the ranges by kind.
// - PROFCPU_BENCH_DIR=<output folder> (collect's, with target/runtime-stubs.json): folds perf's own text with the
//   folder's resolver with and without the table and prints how many distinct stub frames stay unnamed.
// With neither set it prints how to run it and exits.
import { createReadStream } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layout } from '../../src/output/layout.js';
import { readRuntimeStubs } from '../../src/dotnet/runtime-stubs/runtime-stubs-step.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { foldStream } from '../../src/stacks/fold.js';
import { loadFolderResolver } from '../../src/dotnet/naming/folder-resolver.js';
import { inspectProcess } from '../../src/target/inspect.js';
import { TargetFiles } from '../../src/target/target-files.js';

const spread = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return `${sorted[0]} / ${sorted[Math.floor(sorted.length / 2)]} / ${sorted.at(-1)} (min / median / max of ${sorted.length})`;
};

async function live(pid: number): Promise<void> {
  const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 5);
  // A self-contained app's path names no version: the inspection reads it, as collect's does.
  const target = await inspectProcess(pid);
  const files = await TargetFiles.open(pid);
  const ms: number[] = [];
  const bytes: number[] = [];
  const reads: number[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const read = await readRuntimeStubs(pid, files, { version: target.dotnet?.version });
      if ('skipped' in read) throw new Error(read.skipped);
      ms.push(read.ms);
      bytes.push(read.bytesRead);
      reads.push(read.reads);
      if (i === runs - 1) {
        const kinds: Record<string, number> = {};
        for (const r of read.walk.ranges) kinds[r.kind] = (kinds[r.kind] ?? 0) + 1;
        console.log(`runtime     ${read.location.library}`);
        console.log(
          `ranges      ${read.walk.ranges.length} ${JSON.stringify(kinds)}; code blocks ${read.walk.codeBlocks}, ` +
            `stubs among them ${read.walk.stubBlocks}`,
        );
      }
    }
  } finally {
    await files.close();
  }
  console.log(`time        ${spread(ms)} ms`);
  console.log(`bytes read  ${spread(bytes)}`);
  console.log(`reads       ${spread(reads)}`);
}

async function folder(dir: string): Promise<void> {
  const plain = await mkdtemp(join(tmpdir(), 'profcpu-bench-stubs-'));
  try {
    await cp(dir, plain, { recursive: true });
    await postprocess(plain, { resolver: undefined, tarball: false, force: true });
    const script = join(plain, layout.perfScript);
    const withTable = await loadFolderResolver(dir);
    await foldStream(createReadStream(script), {}, undefined, withTable);
    await rm(join(plain, layout.runtimeStubs), { force: true });
    const withoutTable = await loadFolderResolver(plain);
    await foldStream(createReadStream(script), {}, undefined, withoutTable);
    console.log(`folder      ${dir}`);
    console.log(`without     ${withoutTable?.stats.unloggedStubs ?? 0} distinct stub frames unnamed`);
    console.log(
      `with table  ${withTable?.stats.unloggedStubs ?? 0} distinct stub frames unnamed, ` +
        `${withTable?.stats.stubsFromMemory ?? 0} named by kind (${withTable?.sources.runtimeStubs?.ranges ?? 0} ranges)`,
    );
  } finally {
    await rm(plain, { recursive: true, force: true });
  }
}

const pid = process.env['PROFCPU_BENCH_PID'];
const dir = process.env['PROFCPU_BENCH_DIR'];
if (pid) await live(Number(pid));
if (dir) await folder(dir);
if (!pid && !dir)
  console.log(
    'set PROFCPU_BENCH_PID=<pid of a .NET 8+ process> and/or PROFCPU_BENCH_DIR=<collect output folder>, e.g.\n' +
      '  dotnet publish scripts/bench/aspnet-app -c Release -o /var/tmp/asp && ' +
      'dotnet /var/tmp/asp/AspnetLoad.dll --urls http://127.0.0.1:5077 &\n' +
      '  wrk -t1 -c16 -d60s http://127.0.0.1:5077/work &\n' +
      '  profcpu collect --pid <pid> --duration 20 --output /var/tmp/asp-out',
  );

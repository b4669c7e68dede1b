// `npm run bench unwind`: how complete a .NET app's user stacks come out of `perf record --call-graph dwarf,SIZE`
// (#26's mixed unwinding), against frame-pointer call chains. The .NET demo workload (src/collect/dotnet-demo, built
// as `profcpu demo` builds it) is recorded for a few seconds at 99 Hz, once with -g and once per snapshot size; each
// DWARF recording is unwound three ways: by perf script itself (libunwind: CFI only, it stops at the first JIT
// frame), by profcpu's CFI unwinder alone, and mixed (CFI for file-backed code, frame pointers for the JIT's
// memfd/anonymous code). Prints per recording: bytes a sample, the share of samples whose chain reaches the thread's
// start, the mean user frames, and the unwinder's time a sample. Needs root, perf and a .NET SDK.
// PROFCPU_BENCH_SECONDS (default 4) seconds a recording; PROFCPU_BENCH_SIZES (default 8192,16384,32768).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultDemoCacheDir, buildDotnetDemo, startDotnetDemo } from '../../src/collect/demo-dotnet.js';
import { chooseTargetFramework, findDotnetHost, inspectDotnetHost } from '../../src/collect/dotnet-host.js';
import type { MmapEvent, SampleEvent } from '../../src/engine/perf-data/records.js';
import { readPerfDataFile } from '../../src/engine/perf-data/reader.js';
import { unwindUserStack, type UnwindOptions, type UnwindStop } from '../../src/engine/unwind/cfi-unwind.js';
import { readCallFrameInfoByOffset, type UnwindRow } from '../../src/formats/elf/eh-frame.js';
import { bytesSource } from '../../src/formats/elf/elf.js';
import { StackFolder } from '../../src/stacks/fold.js';

const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 4);
const sizes = (process.env['PROFCPU_BENCH_SIZES'] ?? '8192,16384,32768').split(',').map(Number);

type FileRows = ((offset: bigint) => UnwindRow | undefined) | undefined;

/** A file's CFI by file offset, or undefined when it has none readable. */
async function fileRows(path: string): Promise<FileRows> {
  try {
    return (await readCallFrameInfoByOffset(bytesSource(await readFile(path)), path)).rowAtOffset;
  } catch {
    return undefined;
  }
}

/** perf script's own unwinding of `data`, folded: the share of broken chains and the mean stack depth. */
function perfUnwinding(data: string): string {
  const text = execFileSync('perf', ['script', '-i', data], {
    maxBuffer: 1 << 30,
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const folder = new StackFolder({}, () => {});
  folder.write(text);
  const { quality, stacks } = folder.end();
  let frames = 0;
  for (const [stack, n] of stacks) frames += (stack.split(';').length - 1) * n;
  return `${percent(quality.samples - quality.brokenChains, quality.samples)} reach a thread start, ${(frames / quality.samples).toFixed(1)} frames a sample`;
}

async function ourUnwinding(data: string): Promise<void> {
  const mmaps: MmapEvent[] = [];
  const samples: SampleEvent[] = [];
  await readPerfDataFile(data, {
    event(event) {
      if (event.kind === 'mmap') mmaps.push(event);
      else if (event.kind === 'sample') samples.push(event);
    },
  });
  const executable = mmaps.filter((m) => m.prot === undefined || (m.prot & 4) !== 0);
  const rows = new Map<string, FileRows>();
  for (const m of executable)
    if (m.filename.startsWith('/') && !m.filename.startsWith('/memfd:') && !rows.has(m.filename))
      rows.set(m.filename, await fileRows(m.filename));
  for (const mode of ['CFI only', 'mixed'] as const) {
    const stops = new Map<UnwindStop, number>();
    let frames = 0;
    let unwound = 0;
    const started = performance.now();
    for (const sample of samples) {
      if (!sample.userRegs || !sample.userStack || sample.userRegs.abi === 0) continue;
      const mappingOf = (pc: bigint) =>
        executable.findLast((m) => m.pid === sample.pid && pc >= m.start && pc < m.start + m.length);
      const options: UnwindOptions = {
        rowAt(pc) {
          const m = mappingOf(pc);
          return m && rows.get(m.filename)?.(pc - m.start + m.pgoff);
        },
      };
      if (mode === 'mixed')
        options.framePointers = (pc) => {
          const m = mappingOf(pc);
          return !m || !m.filename.startsWith('/') || m.filename.startsWith('/memfd:');
        };
      const result = unwindUserStack(sample.userRegs, sample.userStack, options);
      stops.set(result.stop, (stops.get(result.stop) ?? 0) + 1);
      frames += result.frames.length;
      unwound++;
    }
    const ms = (performance.now() - started) / Math.max(1, unwound);
    console.log(
      `  profcpu ${mode.padEnd(8)} ${percent(stops.get('end') ?? 0, unwound)} reach a thread start, ` +
        `${(frames / unwound).toFixed(1)} frames a sample, ${ms.toFixed(3)} ms a sample; stops ` +
        JSON.stringify(Object.fromEntries(stops)),
    );
  }
}

function percent(part: number, whole: number): string {
  return `${((100 * part) / Math.max(1, whole)).toFixed(1)}%`;
}

function record(pid: number, output: string, callGraph: string[]): number {
  execFileSync(
    'perf',
    ['record', '-q', ...callGraph, '-F', '99', '-p', String(pid), '-o', output, '--', 'sleep', String(seconds)],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  const samples = execFileSync('perf', ['script', '-F', 'tid', '-i', output], { stdio: ['ignore', 'pipe', 'ignore'] })
    .toString()
    .split('\n')
    .filter((line) => line.trim() !== '').length;
  console.log(
    `${callGraph.join(' ')}: ${samples} samples, ${Math.round(statSync(output).size / Math.max(1, samples))} bytes a sample`,
  );
  return samples;
}

const host = await findDotnetHost(process.env);
if (!host) {
  console.log('no `dotnet` on PATH or in DOTNET_ROOT: nothing measured');
  process.exit(0);
}
const install = await inspectDotnetHost(host, { env: process.env, cwd: tmpdir() });
const framework = chooseTargetFramework(install);
if (!install.sdkVersion || !framework) {
  console.log(`${host.path} cannot build the .NET demo: nothing measured`);
  process.exit(0);
}
const build = await buildDotnetDemo({
  host,
  sdkVersion: install.sdkVersion,
  framework,
  cacheDir: defaultDemoCacheDir(process.env),
  env: process.env,
});
const workload = await startDotnetDemo({
  build,
  host,
  env: process.env,
  lifetimeSeconds: seconds * (sizes.length + 2) + 30,
});
const dir = mkdtempSync(join(tmpdir(), 'profcpu-bench-unwind-'));
try {
  console.log(`the .NET demo workload (${framework}), PID ${workload.pid}, ${seconds} s a recording at 99 Hz`);
  const fp = join(dir, 'fp.data');
  record(workload.pid, fp, ['-g']);
  console.log(`  perf script (frame pointers): ${perfUnwinding(fp)}`);
  for (const size of sizes) {
    const data = join(dir, `dwarf-${size}.data`);
    record(workload.pid, data, ['--call-graph', `dwarf,${size}`]);
    console.log(`  perf script (libunwind): ${perfUnwinding(data)}`);
    await ourUnwinding(data);
  }
} finally {
  await workload.stop();
  rmSync(dir, { recursive: true, force: true });
}

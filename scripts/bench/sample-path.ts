// Sample-path benchmark of the native engine: reads a perf.data with the built reader (dist/engine/perf-data/), alone
// (handlers doing nothing) and with the perf-script writer behind it, whose symbols name nothing and whose sink
// keeps nothing: the cost of decoding, ordering and making frame lines, without symbol tables or output files.
// Prints wall and CPU seconds of the first run (as postprocess pays it; the second mode runs with the reader warm)
// and the best of the runs, per mode.
// PROFCPU_BENCH_PERF_DATA names the recording (default bench-out/engines-100k/perf.data, which `npm run bench
// engines` makes); PROFCPU_BENCH_RUNS the runs per mode (default 5); PROFCPU_BENCH_DIST another build's dist/ to
// compare with (run the two alternately: the machine is shared). Never asserted: read the figures.
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const perfData = process.env['PROFCPU_BENCH_PERF_DATA'] ?? `${root}bench-out/engines-100k/perf.data`;
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 5);
const dist = process.env['PROFCPU_BENCH_DIST'] ?? `${root}dist`;

interface Reader {
  readPerfDataFile(
    path: string,
    handlers: { header?(header: unknown): void | Promise<void>; event(event: unknown): void | Promise<void> },
  ): Promise<{ samples: number }>;
}
interface Writer {
  header(header: unknown): Promise<void>;
  event(event: unknown): void | Promise<void>;
}
interface WriterModule {
  ScriptTextWriter: new (
    symbols: { kernel(): undefined; file(): undefined },
    sink: { header(): void; sample(header: string, frames: unknown[], count: number): void },
  ) => Writer;
}

async function main(): Promise<void> {
  if (!existsSync(perfData)) {
    console.log(`no ${perfData}: run \`npm run bench engines\` first, or set PROFCPU_BENCH_PERF_DATA`);
    return;
  }
  if (!existsSync(`${dist}/engine/perf-data/reader.js`)) {
    console.log(`no ${dist}/engine/perf-data/reader.js: run \`npm run build\` first`);
    process.exitCode = 1;
    return;
  }
  const reader = (await import(pathToFileURL(`${dist}/engine/perf-data/reader.js`).href)) as Reader;
  const { ScriptTextWriter } = (await import(pathToFileURL(`${dist}/engine/script-text.js`).href)) as WriterModule;
  console.log(`${perfData}, ${runs} runs per mode, load ${loadavg()[0]!.toFixed(1)}, ${dist}`);

  const modes: Record<string, () => Promise<string>> = {
    reader: async () => {
      let events = 0;
      const summary = await reader.readPerfDataFile(perfData, { event: () => void events++ });
      return `${summary.samples} samples, ${events} events`;
    },
    'reader + writer': async () => {
      let frames = 0;
      let writer: Writer | undefined;
      const sink = {
        header: () => {},
        sample: (_header: string, _frames: unknown[], count: number) => void (frames += count),
      };
      await reader.readPerfDataFile(perfData, {
        header: async (header) => {
          writer = new ScriptTextWriter({ kernel: () => undefined, file: () => undefined }, sink);
          await writer.header(header);
        },
        event: (event) => writer!.event(event),
      });
      return `${frames} frames`;
    },
  };
  for (const [mode, run] of Object.entries(modes)) {
    const figures: { wall: number; cpu: number }[] = [];
    let what = '';
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      const cpu = process.cpuUsage();
      what = await run();
      const used = process.cpuUsage(cpu);
      figures.push({ wall: (performance.now() - started) / 1000, cpu: (used.user + used.system) / 1e6 });
    }
    const best = figures.reduce((a, b) => (b.cpu < a.cpu ? b : a));
    const first = figures[0]!;
    console.log(
      `${mode.padEnd(16)} first ${first.wall.toFixed(3)} s wall ${first.cpu.toFixed(3)} s CPU, ` +
        `best ${best.wall.toFixed(3)} s wall ${best.cpu.toFixed(3)} s CPU (${what})`,
    );
  }
}

await main();

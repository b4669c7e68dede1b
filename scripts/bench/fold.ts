// Fold benchmark: builds 100 MB and 1 GB of `perf script` text under bench-out/ from the real recordings in
// test/fixtures/perf-script/ (repeated with shifted pids and timestamps), folds each with the built CLI
// (`profcpu fold`, in a child process) and prints MB/s, wall seconds and peak RSS. With
// PROFCPU_BENCH_STACKCOLLAPSE=/path/stackcollapse-perf.pl, and inferno-collapse-perf on PATH or in
// PROFCPU_BENCH_INFERNO, their figures on the same inputs follow. Never asserted: read the figures.
// `PROFCPU_BENCH_SIZES=100` limits the sizes (in MB); PROFCPU_BENCH_CLI names another build's main.js to compare.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, statSync, writeSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const fixtures = `${root}test/fixtures/perf-script/`;
const out = `${root}bench-out/`;
const recordings = ['node-jit.txt', 'native-threads.txt', 'kernel-header.txt', 'fields-pid-tid-cpu.txt'];
const sizes = (process.env['PROFCPU_BENCH_SIZES'] ?? '100,1000').split(',').map(Number);

/** Sample blocks of the real recordings (header comments dropped), each ending in a blank line. */
function samples(): string[] {
  const blocks: string[] = [];
  for (const name of recordings) {
    const text = readFileSync(fixtures + name, 'utf8')
      .split('\n')
      .filter((line) => !line.startsWith('#'))
      .join('\n');
    for (const block of text.split('\n\n')) if (block.trim()) blocks.push(`${block.trim()}\n\n`);
  }
  return blocks;
}

/** Writes `mb` MB of samples, round r with pids shifted by 100·r and timestamps by 10·r seconds. */
function build(mb: number): string {
  const path = `${out}fold-${mb}MB.txt`;
  const bytes = mb * 1_000_000;
  if (existsSync(path) && statSync(path).size >= bytes) return path;
  mkdirSync(out, { recursive: true });
  const blocks = samples();
  const fd = openSync(path, 'w');
  let written = 0;
  for (let round = 0; written < bytes; round++) {
    let piece = '';
    for (const block of blocks) {
      piece += block.replace(
        /^(\S.*?\s)(\d+)(?:\/(\d+))?(\s+(?:\[\d+\]\s+)?)(\d+)\.(\d+):/,
        (_m, comm, a, b, gap, s, us) => {
          const shift = (n: string) => String(Number(n) + 100 * round);
          return `${comm}${shift(a)}${b === undefined ? '' : `/${shift(b)}`}${gap}${Number(s) + 10 * round}.${us}:`;
        },
      );
    }
    writeSync(fd, piece);
    written += Buffer.byteLength(piece);
  }
  closeSync(fd);
  return path;
}

interface Run {
  seconds: number;
  /** User + system CPU seconds (all threads), steadier than wall time on a shared machine. */
  cpuSeconds: number | undefined;
  peakMiB: number | undefined;
}

/** Runs a command with its stdout to /dev/null under /usr/bin/time (for the peak RSS when available). */
function run(command: string, args: string[]): Run | string {
  const time = existsSync('/usr/bin/time');
  const start = performance.now();
  const result = time
    ? spawnSync('/usr/bin/time', ['-f', 'maxrss %M cpu %U %S', command, ...args], {
        stdio: ['ignore', 'ignore', 'pipe'],
      })
    : spawnSync(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const seconds = (performance.now() - start) / 1000;
  const stderr = result.stderr?.toString() ?? '';
  if (result.status !== 0) return `failed (${result.error?.message ?? stderr.trim().split('\n').pop()})`;
  const usage = /maxrss (\d+) cpu ([\d.]+) ([\d.]+)/.exec(stderr);
  return {
    seconds,
    cpuSeconds: usage ? Number(usage[2]) + Number(usage[3]) : undefined,
    peakMiB: usage ? Number(usage[1]) / 1024 : undefined,
  };
}

function report(label: string, mb: number, result: Run | string): void {
  if (typeof result === 'string') {
    console.log(`  ${label.padEnd(34)} ${result}`);
    return;
  }
  const rate = (mb / result.seconds).toFixed(1).padStart(7);
  const rss = result.peakMiB === undefined ? '?' : result.peakMiB.toFixed(0);
  const cpu =
    result.cpuSeconds === undefined
      ? ''
      : `  cpu ${result.cpuSeconds.toFixed(2).padStart(6)} s (${(mb / result.cpuSeconds).toFixed(1)} MB/cpu-s)`;
  console.log(
    `  ${label.padEnd(26)} ${rate} MB/s  wall ${result.seconds.toFixed(2).padStart(6)} s${cpu}  peak RSS ${rss} MiB`,
  );
}

function onPath(command: string): string | undefined {
  const found = spawnSync('sh', ['-c', 'command -v "$1"', 'sh', command], { encoding: 'utf8' });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

const cli = process.env['PROFCPU_BENCH_CLI'] ?? `${root}dist/cli/main.js`;
if (!existsSync(cli)) {
  console.log('dist/cli/main.js is missing: run `npm run build` first');
  process.exit(1);
}
const stackcollapse = process.env['PROFCPU_BENCH_STACKCOLLAPSE'];
const inferno = process.env['PROFCPU_BENCH_INFERNO'] ?? onPath('inferno-collapse-perf');
console.log(
  `fold: node ${process.version}, ${availableParallelism()} cpus, load ${loadavg()[0]!.toFixed(1)}; ` +
    `input from ${recordings.join(', ')}`,
);
for (const mb of sizes) {
  const input = build(mb);
  console.log(`${mb} MB (${input.slice(root.length)}):`);
  // The CLI's start (its bundle, yargs and the fold command) costs about 0.12 cpu-s; the tiny run shows it.
  report('profcpu fold (start only)', mb, run(process.execPath, [cli, 'fold', '-q', `${fixtures}native-threads.txt`]));
  report('profcpu fold', mb, run(process.execPath, [cli, 'fold', '-q', input]));
  report('profcpu fold --threads 1', mb, run(process.execPath, [cli, 'fold', '-q', '--threads', '1', input]));
  report('profcpu fold --threads 2', mb, run(process.execPath, [cli, 'fold', '-q', '--threads', '2', input]));
  report('profcpu fold --compat', mb, run(process.execPath, [cli, 'fold', '-q', '--compat', input]));
  if (stackcollapse) report('stackcollapse-perf.pl', mb, run('perl', [stackcollapse, input]));
  if (inferno) report('inferno-collapse-perf', mb, run(inferno, [input]));
}

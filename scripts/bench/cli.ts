// CLI start-up benchmark: wall time of `profcpu --version`, `profcpu --help` and `profcpu fold --help` (the
// built CLI, dist/cli/main.js), next to `node -e 0`, each run PROFCPU_BENCH_RUNS times (default 20): min and median.
// Never asserted: read the figures, and the load average printed with them (another busy process slows every run).
import { spawnSync } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = `${root}dist/cli/main.js`;
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 20);

function measure(args: string[]): number[] {
  const wall: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'inherit'] });
    wall.push(Number(process.hrtime.bigint() - start) / 1e9);
    if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}`);
  }
  return wall;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `${runs} runs each, load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log('command                     wall min   wall median');
for (const [label, args] of [
  ['node -e 0', ['-e', '0']],
  ['profcpu --version', [cli, '--version']],
  ['profcpu --help', [cli, '--help']],
  ['profcpu fold --help', [cli, 'fold', '--help']],
] as const) {
  const wall = measure([...args]);
  console.log(`${label.padEnd(26)}  ${Math.min(...wall).toFixed(3)} s    ${median(wall).toFixed(3)} s`);
}

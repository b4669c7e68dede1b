// CLI start-up benchmark: wall time of `profcpu --version`, `profcpu --help` and `profcpu fold --help` (the
// built CLI, dist/cli/main.js, or PROFCPU_BENCH_CLI to compare another build), next to `node -e 0`, each run
// PROFCPU_BENCH_RUNS times (default 20): min and median, and with /usr/bin/time the CPU time (user + system, steadier
// than wall time on a shared machine; 10 ms steps). Never asserted: read the figures, and the load average printed
// with them (another busy process slows every run).
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { benchNodeEnv, describeNodeEnv } from './support/node-env.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const cli = process.env['PROFCPU_BENCH_CLI'] ?? `${root}dist/cli/main.js`;
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 20);
const time = existsSync('/usr/bin/time');

function measure(args: string[]): { wall: number[]; cpu: number[] } {
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let i = 0; i < runs; i++) {
    const start = process.hrtime.bigint();
    const r = time
      ? spawnSync('/usr/bin/time', ['-f', 'cpu %U %S', process.execPath, ...args], {
          stdio: ['ignore', 'ignore', 'pipe'],
          env: benchNodeEnv,
        })
      : spawnSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env: benchNodeEnv });
    wall.push(Number(process.hrtime.bigint() - start) / 1e9);
    if (r.status !== 0) throw new Error(`node ${args.join(' ')} exited ${r.status}: ${r.stderr.toString()}`);
    const usage = /cpu ([\d.]+) ([\d.]+)\s*$/.exec(r.stderr.toString());
    if (usage) cpu.push(Number(usage[1]) + Number(usage[2]));
  }
  return { wall, cpu };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const minMedian = (xs: number[]) => `${Math.min(...xs).toFixed(3)} s    ${median(xs).toFixed(3)} s`;
describeNodeEnv();
console.log(
  `${runs} runs each of ${cli}, load average ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`,
);
console.log(`command                     wall min   wall median${time ? '   cpu min    cpu median' : ''}`);
for (const [label, args] of [
  ['node -e 0', ['-e', '0']],
  ['profcpu --version', [cli, '--version']],
  ['profcpu --help', [cli, '--help']],
  ['profcpu fold --help', [cli, 'fold', '--help']],
] as const) {
  const { wall, cpu } = measure([...args]);
  console.log(`${label.padEnd(26)}  ${minMedian(wall)}${cpu.length ? `    ${minMedian(cpu)}` : ''}`);
}

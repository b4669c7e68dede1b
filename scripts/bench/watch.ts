// `npm run bench watch`: what `profcpu watch` costs while idle, its goal being under 0.5 % of a core with the default
// polling (1 s). Starts an idle target (a sleeping Node process) and the built CLI watching it with a CPU rule that
// never fires, lets it settle, then reads the watch's own utime + stime from /proc over the measured seconds. Two
// setups: a rule on one PID, and the default filters (every .NET process), which inspect every process visible once
// and read each one's /proc/PID/stat on every scan (5 s) — the more processes, the dearer. Prints each run's share of
// a core and the watch's peak RSS. Needs the built CLI (`npm run build`); no perf (nothing is recorded).
// PROFCPU_BENCH_SECONDS measured seconds per run (default 60), PROFCPU_BENCH_RUNS runs per setup (default 3).
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { cliPath } from '../../test/support/cli.js';

const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 60);
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 3);
const settleSeconds = 8;

async function cpuTicks(pid: number): Promise<number> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

async function peakRssKiB(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmHWM:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
}

/** One run: the watch's share of a core (percent) over `seconds`, and its peak RSS. */
async function measure(args: readonly string[]): Promise<{ percent: number; rssKiB: number }> {
  const out = await mkdtemp('/var/tmp/profcpu-bench-watch-');
  const watch = spawn(process.execPath, [cliPath, 'watch', '--output', out, '--quiet', ...args], { stdio: 'ignore' });
  try {
    await sleep(settleSeconds * 1000);
    if (watch.exitCode !== null) throw new Error(`the watch exited (${watch.exitCode}) while settling`);
    const before = await cpuTicks(watch.pid!);
    const started = performance.now();
    await sleep(seconds * 1000);
    const after = await cpuTicks(watch.pid!);
    const elapsed = (performance.now() - started) / 1000;
    return { percent: (after - before) / elapsed, rssKiB: await peakRssKiB(watch.pid!) };
  } finally {
    watch.kill('SIGTERM');
    await new Promise((resolve) => watch.once('exit', resolve));
    await rm(out, { recursive: true, force: true });
  }
}

const target = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
try {
  const visible = (await readdir('/proc')).filter((n) => /^\d+$/.test(n)).length;
  const setups: [string, string[]][] = [
    [`one PID (--pid ${target.pid})`, ['--pid', String(target.pid), '--cpu-above', '80', '--for', '30s']],
    [`default filters (every .NET process; ${visible} processes visible)`, ['--cpu-above', '80', '--for', '30s']],
  ];
  console.log(`idle watch, default polling (1 s CPU reads, 5 s scans), ${runs} runs of ${seconds} s each`);
  for (const [label, args] of setups) {
    const results = [];
    for (let i = 0; i < runs; i++) results.push(await measure(args));
    const percents = results.map((r) => r.percent);
    console.log(
      `${label}: ${percents.map((p) => `${p.toFixed(2)} %`).join(', ')} of a core ` +
        `(min ${Math.min(...percents).toFixed(2)}, max ${Math.max(...percents).toFixed(2)}); ` +
        `peak RSS ${Math.max(...results.map((r) => r.rssKiB / 1024)).toFixed(0)} MiB`,
    );
  }
} finally {
  target.kill('SIGKILL');
}

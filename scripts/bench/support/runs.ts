// What a timed run of a command gives, and the line a bench prints for several runs of one: the median wall time
// (min-max), the median CPU time and the peak RSS.

export interface Run {
  seconds: number;
  cpuSeconds: number;
  peakMiB: number;
}

/** Prints `label`'s runs on one line, its label padded to `width`; gives the median wall time. */
export function summary(label: string, results: Run[], width = 28): number {
  const walls = results.map((r) => r.seconds).sort((a, b) => a - b);
  const median = walls[Math.floor(walls.length / 2)]!;
  const cpu = results.map((r) => r.cpuSeconds).sort((a, b) => a - b)[Math.floor(results.length / 2)]!;
  const rss = Math.max(...results.map((r) => r.peakMiB));
  console.log(
    `  ${label.padEnd(width)} wall ${median.toFixed(2).padStart(6)} s (${walls[0]!.toFixed(2)}-${walls.at(-1)!.toFixed(2)})` +
      `  cpu ${cpu.toFixed(2).padStart(6)} s  peak RSS ${rss.toFixed(0)} MiB`,
  );
  return median;
}

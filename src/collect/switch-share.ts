// How much of the time an off-CPU recording takes the switches' stacks (collect --switch-share): all of it for a
// target that blocks a few thousand times a second or less, a share of it, in random windows, for one that blocks more
// (src/perf/record.ts, SwitchWindows). perf's cost is mostly compressing each blocking switch's stack copy: on the
// ASP.NET Core bench app (12 000 to 15 000 a second, 2 cores shared with wrk) every switch cost perf 6% of a core,
// a quarter of the time 3.2%, a tenth 2.0%, about what the CPU profile alone costs (1.7%). The rate is read from the
// target's threads' voluntary_ctxt_switches (each a switch of a thread that blocked), twice, a moment apart.
import { opendir } from 'node:fs/promises';
import { procPath, readProcText, type ProcfsOptions } from '../target/procfs.js';

export type SwitchShareRequest = number | 'auto';

/** What `auto` aims at: about this many stacks a second, at most. */
export const autoStacksPerSecond = 2000;
/** The least share `auto` takes: below it, a thread blocking a few times a second would rarely get a stack. */
export const minAutoShare = 0.05;
/** Threads read at most (the first ones listed): a target's thread count is its own to choose. */
const maxThreads = 4096;

/**
 * Blocking switches a second of the target's threads, over `ms`: the sum of voluntary_ctxt_switches of the threads
 * there at both reads. Undefined when the target cannot be read (gone, not permitted).
 */
export async function blockingSwitchRate(
  pid: number,
  procfs: ProcfsOptions,
  ms = 300,
  signal?: AbortSignal,
): Promise<number | undefined> {
  const first = await voluntarySwitches(pid, procfs);
  if (!first) return undefined;
  const started = performance.now();
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
  });
  const second = await voluntarySwitches(pid, procfs);
  const seconds = (performance.now() - started) / 1000;
  if (!second || seconds <= 0) return undefined;
  let switches = 0;
  for (const [tid, count] of second) {
    const before = first.get(tid);
    if (before !== undefined && count >= before) switches += count - before;
  }
  return switches / seconds;
}

/** voluntary_ctxt_switches by thread. */
async function voluntarySwitches(pid: number, procfs: ProcfsOptions): Promise<Map<number, number> | undefined> {
  // Listed a few at a time up to maxThreads, as openPerfMapFiles lists /proc/PID/fd: never the whole of a huge list.
  const names: string[] = [];
  try {
    for await (const entry of await opendir(procPath(pid, 'task', procfs), { bufferSize: 256 })) {
      if (names.length >= maxThreads) break;
      if (/^\d+$/.test(entry.name)) names.push(entry.name);
    }
  } catch {
    return undefined;
  }
  const counts = new Map<number, number>();
  for (const name of names) {
    const text = await readProcText(pid, `task/${name}/status`, procfs).catch(() => undefined);
    const match = text && /^voluntary_ctxt_switches:\s*(\d+)$/m.exec(text);
    if (match) counts.set(Number(name), Number(match[1]));
  }
  return counts;
}

/**
 * The share asked for, or under `auto` the one the rate calls for: all of the time up to autoStacksPerSecond blocking
 * switches a second, then about that many stacks a second, minAutoShare at least. With why, for the progress line.
 */
export function chooseSwitchShare(
  request: SwitchShareRequest,
  rate: number | undefined,
): { share: number; reason: string } {
  if (request !== 'auto') return { share: request, reason: `${Math.round(request * 100)}% of the time, as asked` };
  if (rate === undefined) return { share: 1, reason: 'every one (the target’s switch rate could not be read)' };
  const perSecond = `${Math.round(rate)} blocking switches a second`;
  if (rate <= autoStacksPerSecond) return { share: 1, reason: `every one (${perSecond})` };
  const share = Math.max(minAutoShare, Math.floor((100 * autoStacksPerSecond) / rate) / 100);
  return {
    share,
    reason: `${Math.round(share * 100)}% of the time, in random windows (${perSecond}; --switch-share 100 takes every one)`,
  };
}

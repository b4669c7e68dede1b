// The off-CPU lines of collect's and postprocess's summaries: time blocked and what was left out, then the heaviest
// blocking stacks. Thread and frame names come from the target: printed as terminal-safe text.
import type { OffCpuReport } from '../postprocess/offcpu-outputs.js';
import { terminalText } from './terminal-text.js';

/** Blocking stacks the summary names. */
const summaryStacks = 5;
/** Thread kinds it names. */
const summaryKinds = 6;

/**
 * The summary's lines: time blocked and what was left out, then the heaviest blocking stacks, each by its thread's
 * name (the root frame), the deepest managed frame (what the code was doing when it blocked) and the deepest user
 * frame (where it blocked: a wait in the runtime or libc).
 */
export function offCpuSummary(report: OffCpuReport): string[] {
  const { intervals, unpaired } = report;
  const left: string[] = [];
  if (intervals.short > 0) left.push(`${intervals.short} under --min-block ${report.minBlockUs} µs`);
  if (intervals.preempted > 0) left.push(`${intervals.preempted} preempted (waiting for a CPU, not blocked)`);
  if (intervals.unheld > 0) left.push(`${intervals.unheld} while too many threads were off the CPU at once to hold`);
  const lost = unpaired.unpaired + unpaired.inWithoutOut;
  if (lost > 0) left.push(`${lost} switches with no partner (records lost, or the recording's edges)`);
  const lines = [
    `off-CPU: ${formatMs(report.blockedUs)} blocked in ${intervals.blocked + intervals.open} stretches` +
      (left.length > 0 ? `; left out: ${left.join(', ')}` : ''),
  ];
  const windows = report.switchWindows;
  if (windows) {
    const all = windows.sampledUs + windows.unsampledUs;
    const share = all > 0 ? ((100 * windows.sampledUs) / all).toFixed(1) : '0';
    lines.push(
      `  stacks taken in windows of time (collect --switch-share): ${share}% of the time blocked had one; each ` +
        `thread's stacks weighed to its whole time blocked` +
        (windows.unsampledThreads > 0
          ? `; ${windows.unsampledThreads} threads with none, under [blocked: stack not sampled]`
          : ''),
    );
  }
  for (const { stack, us } of report.top.slice(0, summaryStacks)) {
    const share = report.blockedUs > 0 ? ((100 * us) / report.blockedUs).toFixed(1) : '0';
    lines.push(`  ${share.padStart(5)}%  ${formatMs(us).padStart(10)}  ${describeStack(stack)}`);
  }
  if (report.threads?.length) {
    lines.push('threads: running / blocked / waiting for a CPU (wallclock.svg)');
    for (const kind of report.threads.slice(0, summaryKinds)) {
      const times = [kind.runningUs, kind.blockedUs, kind.runnableUs].map((us) => formatMs(us).padStart(10));
      lines.push(`  ${times.join(' /')}  ${terminalText(kind.kind, { maxLength: 60 })}`);
    }
  }
  return lines;
}

/**
 * `thread: App.Method → Framework.Wait → native_wait`, from a folded stack (root first, `;`-separated, kinds
 * annotated): the deepest managed frame outside System.* and Microsoft.* (the code that waited), the deepest managed
 * frame (how), the deepest user frame (where: the runtime's or glibc's wait).
 */
function describeStack(stack: string): string {
  const frames = stack.split(';');
  const thread = frames[0] ?? '';
  const user = frames.slice(1).filter((frame) => !frame.endsWith('_[k]'));
  const managed = user.filter((frame) => frame.endsWith('_[j]'));
  const app = managed.findLast((frame) => !/^(System|Microsoft|Interop)\b/.test(frame));
  const parts = [...new Set([app, managed.at(-1), user.at(-1)])].filter((f): f is string => f !== undefined);
  const text = `${thread}: ${parts.map((f) => f.replace(/_\[[jk]\]$/, '')).join(' → ') || '(kernel only)'}`;
  return terminalText(text, { maxLength: 160 });
}

function formatMs(us: number): string {
  return us >= 10_000_000 ? `${(us / 1e6).toFixed(1)} s` : `${(us / 1000).toFixed(1)} ms`;
}

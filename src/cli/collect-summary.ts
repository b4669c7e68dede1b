// The one-screen summary collect prints at the end: a finished session (and its postprocess result, if any) in,
// lines of text out, ready for a terminal: the target's command line and the frame names (from its perf map) are
// escaped, so a hostile target cannot send escape sequences or forge lines. Pure.
import { basename, join, relative } from 'node:path';
import { layout } from '../output/layout.js';
import { terminalText } from './terminal-text.js';
import { splitAnnotation, type FoldedStacks } from '../stacks/folded.js';
import type { CollectResult } from '../collect/session.js';
import type { StepReport } from '../step/step.js';
import { symbolsFacts, type SymbolsStepFacts } from '../debug-files/symbols-step.js';
import type { OffCpuReport } from '../postprocess/offcpu-outputs.js';
import { offCpuSummary } from './offcpu-summary.js';

/** What the summary reads from a postprocess result (src/postprocess/postprocess.ts PostprocessResult). */
export interface PostprocessFacts {
  fold: {
    samples: number;
    keptSamples: number;
    stacks: FoldedStacks;
    quality: {
      samples: number;
      fullyNamed: number;
      fullyNamedExceptCoreclr?: number;
      fullyNamedExceptLibraries?: number;
      unnamedLibraries?: Record<string, number>;
      brokenChains?: number;
      brokenChainsByFile?: Record<string, number>;
    };
  };
  /** The off-CPU profile's figures (collect --off-cpu). */
  offCpu?: OffCpuReport;
}

export interface TopFrame {
  frame: string;
  /** Samples with this frame as the leaf. */
  self: number;
}

/**
 * What fetches the debug files of the `unnamed` libraries (file names), given what collect's symbols step did: the
 * `profcpu symbols` command when collect did not look for them or stopped at its limit, a server that has them when
 * collect asked its servers in vain.
 */
export function librariesRemedy(symbols: StepReport | undefined, unnamed: readonly string[], pid: number): string {
  const command = `\`profcpu symbols --pid ${pid}\` fetches them`;
  const report = symbolsFacts(symbols);
  const looked = (report.libraries ?? []).filter((l) => unnamed.includes(basename(l.path)));
  if (looked.some((l) => l.status === 'over-limit'))
    return `${command} (collect looked for ${report.maxLibraries ?? 'a limited number of'} libraries at most)`;
  if (!looked.some((l) => ['not-found', 'failed', 'offline'].includes(l.status)))
    return report.mode === 'none' || report.mode === 'coreclr'
      ? `${command} (collect ran with --symbols ${report.mode})`
      : command;
  const servers = report.servers ?? [];
  if (servers.length === 0) return `collect asked no symbol server (--offline): ${command}`;
  // Libraries .NET does not ship are not asked of Microsoft's server (debug-symbols.ts): with no other server set,
  // nobody was asked for them.
  const askedFor = (l: NonNullable<SymbolsStepFacts['libraries']>[number]) =>
    (l.attempts ?? []).some((a) => a.outcome !== 'skipped');
  if (!looked.some(askedFor))
    return (
      'collect had no symbol server for them (Microsoft’s holds only .NET’s own libraries): ' +
      `\`profcpu symbols --pid ${pid} --symbol-server debuginfod:URL\` fetches them from the target distribution’s ` +
      'debuginfod (or set DEBUGINFOD_URLS for collect)'
    );
  const asked = servers.slice(0, 2).join(', ') + (servers.length > 2 ? ` and ${servers.length - 2} more` : '');
  return (
    `collect asked ${terminalText(asked, { maxLength: 120 })} in vain: \`profcpu symbols --pid ${pid} ` +
    '--symbol-server URL` fetches them from a server that has them (the debuginfod of the target’s distribution)'
  );
}

/**
 * The naming headline: the share of samples whose app and framework frames are all named; then, when native libraries
 * without debug files leave frames unnamed, which ones and what fetches their debug files.
 */
function namingLines(q: PostprocessFacts['fold']['quality'], pid: number, symbols?: StepReport): string[] {
  const libraries = Object.entries(q.unnamedLibraries ?? {}).sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1));
  if (q.fullyNamedExceptLibraries === undefined || libraries.length === 0)
    return [
      `named       ${percent(q.fullyNamed, q.samples)} of samples have every frame named` +
        (q.fullyNamedExceptCoreclr === undefined || q.fullyNamedExceptCoreclr === q.fullyNamed
          ? ''
          : ` (${percent(q.fullyNamedExceptCoreclr, q.samples)} not counting libcoreclr.so)`),
    ];
  const shown = libraries
    .slice(0, 4)
    .map(
      ([file, n], i) =>
        `${terminalText(file, { maxLength: 60 })} (${i === 0 ? 'unnamed frames in ' : ''}${percent(n, q.samples)}${i === 0 ? ' of samples' : ''})`,
    )
    .join(', ');
  const more = libraries.length > 4 ? ` and ${libraries.length - 4} more` : '';
  const remedy = librariesRemedy(
    symbols,
    libraries.map(([file]) => file),
    pid,
  );
  return [
    `named       ${percent(q.fullyNamedExceptLibraries, q.samples)} of samples have every app and framework frame ` +
      `named (every frame: ${percent(q.fullyNamed, q.samples)})`,
    `libraries   no debug files for ${shown}${more}: ${remedy}`,
  ];
}

/**
 * The share of samples whose call chain stops short of a thread's start, by the file it stopped in, when it is
 * 0.1% or more: their callers are missing from the flame graph (code built without frame pointers hides them).
 */
export function chainLines(q: PostprocessFacts['fold']['quality'], stackCopies = false): string[] {
  const broken = q.brokenChains ?? 0;
  if (q.samples === 0 || broken / q.samples < 0.001) return [];
  const files = Object.entries(q.brokenChainsByFile ?? {}).sort(([a, x], [b, y]) => y - x || (a < b ? -1 : 1));
  const shown = files
    .slice(0, 3)
    .map(([file, n]) => `${terminalText(file, { maxLength: 60 })} (${percent(n, q.samples)})`)
    .join(', ');
  const more = files.length > 3 ? ` and ${files.length - 3} more` : '';
  // Recorded with stack copies (--unwind mixed), a chain stops where the copy ends, or where no CFI nor frame pointer
  // leads on; with frame pointers only, at the first frame built without them.
  const why = stackCopies
    ? 'their stacks go deeper than the stack copy (raise --stack-size) or through code unwinding cannot step'
    : 'code built without frame pointers hides their callers (--unwind mixed unwinds them)';
  return [
    `chains      ${percent(broken, q.samples)} of samples have a broken call chain, cut in ${shown}${more}: ${why}`,
  ];
}

/** The frames most often on top of the stack, heaviest first (ties by name, so the order is stable). */
export function topFrames(stacks: FoldedStacks, count: number): TopFrame[] {
  const self = new Map<string, number>();
  for (const [stack, n] of stacks) {
    const leaf = stack.slice(stack.lastIndexOf(';') + 1);
    self.set(leaf, (self.get(leaf) ?? 0) + n);
  }
  return [...self]
    .map(([frame, n]) => ({ frame, self: n }))
    .sort((a, b) => b.self - a.self || (a.frame < b.frame ? -1 : a.frame > b.frame ? 1 : 0))
    .slice(0, count);
}

const annotationLabels = { j: '  [managed]', k: '  [kernel]', i: '  [inlined]' } as const;

const percent = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');

/**
 * The summary lines. `cwd` makes paths short when the output folder is under it; `showPath`, when given, shows them
 * whole as it says instead (the host's paths, when profcpu runs in a sidecar).
 */
export function formatSummary(
  result: CollectResult<PostprocessFacts>,
  cwd: string,
  topCount = 8,
  showPath?: (path: string) => string,
): string[] {
  const where = (file: string) => {
    const path = join(result.dir, file);
    if (showPath) return showPath(path);
    const rel = relative(cwd, path);
    return rel.startsWith('..') ? path : rel;
  };
  const command = terminalText(result.target.cmdline.join(' '), { maxLength: 90 });
  const lines = [
    `target      ${result.target.pid} (ns pid ${result.target.nspid}) ${command}`,
    `recorded    ${result.recordedSeconds.toFixed(1)} s at ${result.event}` +
      (result.record.command.includes('--switch-events')
        ? ` and every switch off the CPU, ${result.record.samples ?? '?'} samples and switches`
        : `, ${result.record.samples ?? '?'} samples`) +
      (result.record.end === 'duration'
        ? ''
        : result.record.end === 'stopped'
          ? ' (stopped early)'
          : ' (the target exited)'),
  ];
  const pp = result.postprocess;
  if (pp) {
    const { fold } = pp;
    lines.push(
      `stacks      ${fold.keptSamples} of ${fold.samples} samples kept, ${fold.stacks.size} distinct stacks`,
      ...namingLines(fold.quality, result.target.pid, result.steps['symbols']),
      ...chainLines(
        fold.quality,
        result.record.command.some((arg) => arg.startsWith('dwarf,')),
      ),
    );
    const top = topFrames(fold.stacks, topCount);
    if (top.length) {
      lines.push('top frames (self)');
      for (const t of top) {
        const { name, annotation } = splitAnnotation(t.frame);
        const label = `${terminalText(name, { maxLength: 100 })}${annotation ? annotationLabels[annotation] : ''}`;
        lines.push(`  ${percent(t.self, fold.keptSamples).padStart(6)}  ${label}`);
      }
    }
    lines.push(`flame graph ${where(layout.flamegraphSvg)}`);
    if (pp.offCpu) lines.push(...offCpuSummary(pp.offCpu), `off-CPU     ${where(layout.offCpuSvg)}`);
    lines.push(`tarball     ${where(layout.tarball)}`);
  } else {
    lines.push(
      `raw data    ${where(layout.perfData)} (not post-processed: run \`profcpu postprocess --dir ${where('.')}\`)`,
    );
  }
  const phases = Object.entries(result.phaseMs)
    .map(([name, ms]) => `${name} ${(ms / 1000).toFixed(2)} s`)
    .join(', ');
  lines.push(`phases      ${phases}`);
  // Said whenever the perf at hand misbehaves with -p, with what profcpu did about it.
  if (result.scope.spins || result.scope.scope.kind === 'cgroup')
    lines.push(`perf        ${terminalText(result.scope.reason)}`);
  lines.push(
    `cpu         profcpu ${(result.cpuMs.profcpu / 1000).toFixed(2)} s` +
      (result.cpuMs.perf === undefined ? '' : `, perf ${(result.cpuMs.perf / 1000).toFixed(2)} s`) +
      ' while recording',
  );
  return lines;
}

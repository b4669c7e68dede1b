// `profcpu diff BEFORE AFTER`: compares two profiles (output folders, prof.tar.gz files or folded stacks, in any mix),
// writes the differential flame graph (diff.svg, diff.html) and diff.json, and prints the frames whose shares moved
// most. `--fail-above POINTS` exits 4 when a frame's inclusive share grew by more, for a CI job to gate a change on.
// Frame names come from the profiled program: printed as terminal-safe text.
import type { Argv, CommandModule } from 'yargs';
import { diffFiles, runDiff, type DiffResult, type DiffView } from '../diff/diff.js';
import { groupDigits } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import type { FrameChange, MergeRule } from '../stacks/diff.js';
import { createReporter } from './reporter.js';
import { terminalText } from './terminal-text.js';

export interface DiffArgs {
  before: string;
  after: string;
  output: string;
  view: DiffView;
  raw: boolean;
  keepTier: boolean;
  keepArgs: boolean;
  keepGenerics: boolean;
  keepNumbers: boolean;
  top: number;
  failAbove?: number;
  failOnly?: string;
  title?: string;
  quiet: boolean;
}

/** The exit code when a frame grew past --fail-above. */
export const grewExitCode = 4;

const ruleWords: Record<MergeRule, string> = {
  tier: 'differing only in JIT tier (--keep-tier keeps them apart)',
  args: 'differing only in argument lists (--keep-args)',
  generics: 'differing only in generic arguments (--keep-generics)',
  numbers: 'differing only in numbers: thread numbers, addresses, stub numbers (--keep-numbers)',
};

/** The lines the terminal shows: the two profiles, what was merged, the frames that moved most. */
export function diffReport(result: DiffResult, top: number): string[] {
  const { diff, changes, sources } = result;
  const lines = [
    `before: ${terminalText(sources.before)}, ${groupDigits(Math.round(diff.totals.before))} in all`,
    `after:  ${terminalText(sources.after)}, ${groupDigits(Math.round(diff.totals.after))} in all`,
    !diff.normalized
      ? 'weights compared as they are (--raw)'
      : `shares compared: BEFORE's weights ×${diff.scale.toPrecision(3)} to AFTER's total (--raw compares counts)`,
  ];
  for (const { rule, names, example } of diff.merged)
    lines.push(
      `merged ${names} name${names === 1 ? '' : 's'} ${ruleWords[rule]}, e.g. ${terminalText(example, { maxLength: 160 })}`,
    );
  const moved = changes.filter((c) => Math.abs(c.inclusivePoints) >= 0.005 || Math.abs(c.selfPoints) >= 0.005);
  lines.push(
    moved.length === 0
      ? 'no frame’s share moved'
      : `frames whose share moved most (${Math.min(top, moved.length)} of ${moved.length}), in points of the total:`,
  );
  if (moved.length > 0) {
    lines.push('  inclusive: before   after    Δ      self: before   after    Δ    frame');
    for (const change of moved.slice(0, top)) lines.push(row(change));
  }
  return lines;
}

function row(c: FrameChange): string {
  const pct = (n: number) => `${n.toFixed(2)}%`.padStart(8);
  const pts = (n: number) => `${n > 0 ? '+' : n < 0 ? '−' : '±'}${Math.abs(n).toFixed(2)}`.padStart(7);
  return (
    `  ${' '.repeat(9)}${pct(c.before.inclusiveShare)}${pct(c.after.inclusiveShare)}${pts(c.inclusivePoints)}` +
    `  ${' '.repeat(4)}${pct(c.before.selfShare)}${pct(c.after.selfShare)}${pts(c.selfPoints)}    ` +
    terminalText(c.frame, { maxLength: 200 })
  );
}

/** The frames (those `only` matches, when given) whose inclusive share grew by more than `points`, largest first. */
export function grownPast(changes: readonly FrameChange[], points: number, only?: RegExp): FrameChange[] {
  return changes
    .filter((c) => c.inclusivePoints > points && (only === undefined || only.test(c.frame)))
    .sort((a, b) => b.inclusivePoints - a.inclusivePoints);
}

function failOnlyPattern(text: string | undefined): RegExp | undefined {
  if (text === undefined) return undefined;
  try {
    return new RegExp(text);
  } catch (cause) {
    throw usage(`--fail-only must be a regular expression: ${(cause as Error).message}`);
  }
}

function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, { remedy: 'See `profcpu diff --help`.' });
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, DiffArgs> = {
  builder: (yargs: Argv) =>
    yargs
      .positional('before', {
        type: 'string',
        describe: 'The profile before: an output folder, a prof.tar.gz or folded stacks',
      })
      .positional('after', { type: 'string', describe: 'The profile after, the same kinds' })
      .option('output', {
        alias: 'o',
        type: 'string',
        default: 'profcpu-diff',
        describe: 'Folder for diff.svg, diff.html, diff.json',
      })
      .option('view', {
        choices: ['cpu', 'offcpu', 'wall'] as const,
        default: 'cpu' as DiffView,
        describe: 'Which profile of output folders: CPU, off-CPU or wall-clock (collect --off-cpu)',
      })
      .option('raw', { type: 'boolean', default: false, describe: 'Compare raw counts, not shares of each total' })
      .option('keep-tier', { type: 'boolean', default: false, describe: 'Keep .NET JIT tiers apart' })
      .option('keep-args', { type: 'boolean', default: false, describe: 'Keep argument lists apart' })
      .option('keep-generics', { type: 'boolean', default: false, describe: 'Keep generic instantiations apart' })
      .option('keep-numbers', {
        type: 'boolean',
        default: false,
        describe: 'Keep thread numbers, addresses and stub numbers apart',
      })
      .option('top', { type: 'number', default: 20, describe: 'Frames listed in the terminal' })
      .option('fail-above', {
        type: 'number',
        describe: `Exit ${grewExitCode} when a frame's inclusive share grew by more than this many points`,
      })
      .option('fail-only', {
        type: 'string',
        describe: 'With --fail-above: only frames matching this regular expression count (your own code: ^MyApp\\.)',
      })
      .option('title', { type: 'string', describe: 'Title of the flame graphs' })
      .option('quiet', { alias: 'q', type: 'boolean', default: false, describe: 'Print only a --fail-above failure' })
      .example('$0 diff profilings/slow profilings/fast', 'What changed between two recordings')
      .example(
        "$0 diff before.tar.gz after.tar.gz --fail-above 5 --fail-only '^MyApp\\.'",
        `In CI: exit ${grewExitCode} when one of the app's frames grew by more than 5 points`,
      )
      .epilogue(
        'Names are merged where they differ only in noise (JIT tier, argument lists, generic arguments, numbers ' +
          'ending thread names, addresses), and the summary says what it merged; --keep-* keeps each apart. ' +
          `Exit codes: 0 done, ${grewExitCode} a frame grew past --fail-above, 1 an error, 2 a usage error.`,
      ) as unknown as Argv<DiffArgs>,
  handler: async (args) => {
    if (!Number.isInteger(args.top) || args.top < 0) throw usage(`--top must be a whole number, not ${args.top}`);
    if (args.failAbove !== undefined && !(Number.isFinite(args.failAbove) && args.failAbove >= 0))
      throw usage(`--fail-above must be a number of points, 0 or more, not ${args.failAbove}`);
    const only = failOnlyPattern(args.failOnly);
    if (only && args.failAbove === undefined) throw usage('--fail-only goes with --fail-above');
    const reporter = createReporter({ quiet: args.quiet });
    const result = await runDiff(args.before, args.after, {
      output: args.output,
      view: args.view,
      normalize: !args.raw,
      keepTier: args.keepTier,
      keepArgs: args.keepArgs,
      keepGenerics: args.keepGenerics,
      keepNumbers: args.keepNumbers,
      ...(args.title !== undefined && { title: args.title }),
    });
    if (!args.quiet) {
      process.stdout.write(`${diffReport(result, args.top).join('\n')}\n`);
      reporter.info(`wrote ${[diffFiles.svg, diffFiles.html, diffFiles.json].map((f) => result.files[f]).join(', ')}`);
    }
    if (args.failAbove === undefined) return;
    const grown = grownPast(result.changes, args.failAbove, only);
    if (grown.length === 0) return;
    for (const change of grown.slice(0, 5))
      reporter.warn(
        `${terminalText(change.frame, { maxLength: 200 })} grew by ${change.inclusivePoints.toFixed(2)} points ` +
          `(${change.before.inclusiveShare.toFixed(2)}% → ${change.after.inclusiveShare.toFixed(2)}%), more than --fail-above ${args.failAbove}`,
      );
    process.exitCode = grewExitCode;
  },
};

export default command;

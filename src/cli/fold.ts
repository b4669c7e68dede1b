// `profcpu fold [FILE|-]`: `perf script` text from a file or stdin to folded stacks (`a;b;c 12`, sorted) on stdout.
// The flags map onto the fold stage's options in foldOptionsFromArgs; --compat and the flags named after
// stackcollapse-perf.pl's options reproduce that script's output.
import type { Argv, CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';
import { defaultFoldOptions, foldStream, type FoldOptions, type FoldResult } from '../stacks/fold.js';
import { defaultFoldFileOptions, foldFile, type FoldFileOptions } from '../stacks/fold-file.js';
import { formatFolded } from '../stacks/folded.js';
import { foldFlagOptions, withFoldFlags, type FoldFlagArgs } from './fold-flags.js';
import { createReporter } from './reporter.js';

export interface FoldArgs extends FoldFlagArgs {
  file?: string;
  compat: boolean;
  all?: boolean;
  kernel?: boolean;
  jit?: boolean;
  pid: boolean;
  tid: boolean;
  addrs: boolean;
  threads?: number;
  quiet: boolean;
}

/** The fold stage's options for these flags. */
export function foldOptionsFromArgs(args: Omit<FoldArgs, 'file' | 'quiet' | 'threads'>): Partial<FoldOptions> {
  const options: Partial<FoldOptions> = {
    ...foldFlagOptions(args, 'fold'),
    compat: args.compat,
    includePid: args.pid,
    includeTid: args.tid,
    addrs: args.addrs,
  };
  // Unset annotation flags leave the mode's default: annotated, except with --compat (as the script).
  const kernel = args.kernel ?? args.all;
  const jit = args.jit ?? args.all;
  if (kernel !== undefined) options.annotateKernel = kernel;
  if (jit !== undefined) options.annotateJit = jit;
  return options;
}

function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, { remedy: 'See `profcpu fold --help`.' });
}

/** Threads for a file: the default for large files, or the number given for any file. */
function fileOptionsFromArgs(args: Pick<FoldArgs, 'threads'>): Partial<FoldFileOptions> {
  if (args.threads === undefined) return {};
  if (!Number.isInteger(args.threads) || args.threads < 1) {
    throw usage(`--threads must be a whole number of threads, 1 or more, not ${args.threads}`);
  }
  return { threads: args.threads, parallelThreshold: 0 };
}

/** Refuses results with nothing to show, telling "nothing there" apart from "everything filtered out". */
function checkResult(result: FoldResult, source: string): void {
  if (result.samples === 0) {
    throw new ProfcpuError('NO_SAMPLES', `no perf script samples in ${source}`, {
      remedy: 'Pass the text `perf script` prints (a header line per sample, then one frame per line).',
    });
  }
  if (result.keptSamples === 0) {
    const events = result.events.length ? ` (events seen: ${result.events.join(', ')})` : '';
    throw new ProfcpuError('ALL_FILTERED', `all ${result.samples} samples of ${source} were filtered out${events}`, {
      remedy: 'Name one of the events seen with --event-filter, or drop the option.',
    });
  }
}

/**
 * Writes the sorted folded lines in 1 MiB pieces, each awaited (a slow reader holds us back). A reader that goes
 * away (`| head`) ends the output quietly, as with any filter.
 */
async function writeFolded(result: FoldResult): Promise<void> {
  const write = (text: string) =>
    new Promise<void>((resolve, reject) => process.stdout.write(text, (error) => (error ? reject(error) : resolve())));
  // The stream also emits its write errors; they are handled through the callbacks above.
  const ignore = () => {};
  process.stdout.on('error', ignore);
  try {
    let piece = '';
    for (const line of formatFolded(result.stacks)) {
      piece += line;
      if (piece.length >= 1 << 20) {
        await write(piece);
        piece = '';
      }
    }
    if (piece) await write(piece);
  } catch (cause) {
    if ((cause as NodeJS.ErrnoException).code === 'EPIPE') return;
    throw new ProfcpuError('IO', `cannot write the folded stacks: ${(cause as Error).message}`, {
      remedy: 'Check where standard output goes (a full disk, a closed pipe).',
      cause,
    });
  } finally {
    process.stdout.off('error', ignore);
  }
}

function summary(result: FoldResult): string {
  const skipped = Object.entries(result.skipped).map(([kind, n]) => `${n} ${kind}`);
  const q = result.quality;
  const named = q.samples ? ((100 * q.fullyNamed) / q.samples).toFixed(1) : '0';
  return (
    `folded ${result.keptSamples} of ${result.samples} samples into ${result.stacks.size} stacks` +
    ` (${named}% fully named; events: ${result.events.join(', ') || 'none named'}` +
    `${skipped.length ? `; skipped: ${skipped.join(', ')}` : ''})`
  );
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, FoldArgs> = {
  builder: (yargs: Argv) =>
    withFoldFlags(
      yargs
        .positional('file', { type: 'string', describe: '`perf script` output; - or nothing reads stdin' })
        .option('compat', {
          type: 'boolean',
          default: defaultFoldOptions.compat,
          describe: "Output exactly what FlameGraph's stackcollapse-perf.pl would (its flags below apply)",
        })
        .option('all', { type: 'boolean', describe: 'Annotate kernel (_[k]) and JIT (_[j]) frames (default: on)' })
        .option('kernel', { type: 'boolean', describe: 'Annotate kernel frames _[k] (default: on, off with --compat)' })
        .option('jit', { type: 'boolean', describe: 'Annotate JIT frames _[j] (default: on, off with --compat)' })
        .option('pid', { type: 'boolean', default: defaultFoldOptions.includePid, describe: 'Root frame comm-PID' })
        .option('tid', { type: 'boolean', default: defaultFoldOptions.includeTid, describe: 'Root frame comm-PID/TID' })
        .option('addrs', {
          type: 'boolean',
          default: defaultFoldOptions.addrs,
          describe: 'Show the address of frames without a name',
        }),
      'samples; --compat: period',
    )
      .option('threads', {
        type: 'number',
        describe:
          `Worker threads for a file (default here: ${defaultFoldFileOptions.threads}, for files of 64 MiB or more;` +
          ' a number given applies to any file)',
        requiresArg: true,
      })
      .option('quiet', { alias: 'q', type: 'boolean', default: false, describe: 'No summary on stderr' })
      .example('perf script | $0 fold > out.folded', 'Readable .NET-aware folded stacks')
      .example(
        '$0 fold --compat --all perf.txt',
        'Same output as stackcollapse-perf.pl --all perf.txt',
      ) as unknown as Argv<FoldArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const options = foldOptionsFromArgs(args);
    // yargs hands a lone `-` over as ''.
    const file = args.file === undefined || args.file === '-' || args.file === '' ? undefined : args.file;
    const source = file ?? 'standard input';
    const fileOptions = fileOptionsFromArgs(args);
    const warn = (message: string) => reporter.warn(message);
    let result: FoldResult;
    if (file !== undefined) result = await foldFile(file, options, warn, undefined, fileOptions);
    else {
      try {
        result = await foldStream(process.stdin, options, warn);
      } catch (cause) {
        throw new ProfcpuError('IO', `cannot read standard input: ${(cause as Error).message}`, {
          remedy: 'Pipe `perf script` output into `profcpu fold -`, or name a file.',
          cause,
        });
      }
    }
    checkResult(result, source);
    await writeFolded(result);
    reporter.info(summary(result));
  },
};

export default command;

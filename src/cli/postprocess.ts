// `profcpu postprocess -dir D` (or `--dir D`): turns an output folder holding perf.data into the flame graphs,
// FlameScope text, folded stacks, speedscope file, manifest and tarball. Flags map onto PostprocessOptions in
// `toOptions`; progress and warnings go to stderr, the list of files written to stdout. Ctrl-C or SIGTERM stops
// perf script and removes half-written outputs; perf.data is always kept.
import { dirname, relative } from 'node:path';
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { layout } from '../bundle/layout.js';
import {
  defaultPostprocessOptions,
  postprocess,
  type Engine,
  type PostprocessOptions,
  type PostprocessResult,
} from '../postprocess/postprocess.js';
import { paletteNames, type PaletteName } from '../render/index.js';
import { foldFlagOptions, withFoldFlags, type FoldFlagArgs } from './fold-flags.js';
import { OutputFolder } from '../files/output-folder.js';
import { sidecarSettings } from './collect.js';
import { createReporter, type Reporter } from './reporter.js';

interface PostprocessArgs extends FoldFlagArgs {
  dir: string;
  title?: string;
  colors?: string;
  width?: number;
  perf: string;
  engine: Engine;
  force: boolean;
  tarball: boolean;
  quiet: boolean;
}

/** Maps the command line onto the pipeline's options. */
export function toOptions(args: Omit<PostprocessArgs, 'dir' | 'quiet'>): Partial<PostprocessOptions> {
  return {
    fold: foldFlagOptions(args, 'postprocess'),
    title: args.title,
    svg: {
      ...(args.colors === undefined ? {} : { colors: args.colors as PaletteName }),
      ...(args.width === undefined ? {} : { width: args.width }),
    },
    perfPath: args.perf,
    engine: args.engine,
    force: args.force,
    tarball: args.tarball,
  };
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, PostprocessArgs> = {
  builder: (yargs: Argv) =>
    withFoldFlags(
      yargs.option('dir', {
        type: 'string',
        demandOption: 'Name the folder holding perf.data: --dir DIR (or -dir DIR)',
        describe: 'Output folder holding perf.data (and collect’s target/ snapshots); outputs are written there',
        requiresArg: true,
      }),
    )
      .option('title', { type: 'string', describe: 'Title of the flame graphs', requiresArg: true })
      .option('colors', {
        type: 'string',
        choices: [...paletteNames],
        describe: 'Flame graph palette (default: dotnet)',
      })
      .option('width', { type: 'number', describe: 'SVG width in pixels (default: 1200)', requiresArg: true })
      .option('perf', {
        type: 'string',
        default: defaultPostprocessOptions.perfPath,
        describe: 'perf executable',
        requiresArg: true,
      })
      .option('engine', {
        choices: ['perf', 'native'] as const,
        default: defaultPostprocessOptions.engine,
        describe: 'Who reads perf.data: perf script, or profcpu itself (no perf needed)',
      })
      .option('force', {
        type: 'boolean',
        default: defaultPostprocessOptions.force,
        describe: 'Read a perf.data owned by another user (perf -f)',
      })
      .option('tarball', {
        type: 'boolean',
        default: defaultPostprocessOptions.tarball,
        describe: `Write ${layout.tarball} (--no-tarball to skip)`,
      })
      .option('quiet', { type: 'boolean', default: false, alias: 'q', describe: 'No progress lines' })
      .example(
        '$0 postprocess -dir profilings/15-02-11_2026-11-22',
        'Re-render a recording (the original tool’s single-dash options)',
      )
      .epilogue(
        `Writes into the folder: ${layout.flamegraphSvg} (open in a browser), ${layout.flamegraphHtml} (offline ` +
          `d3-flame-graph), ${layout.speedscope} (speedscope.app), ${layout.foldedStacks} (flamegraph.pl/inferno ` +
          `input), ${layout.perfScript} (perf script text with times: FlameScope lists every file of the folder it ` +
          `is given, so point it at ${dirname(layout.perfScript)}/ alone), ${layout.manifest} (versions, commands, ` +
          `counts, SHA-256 of each file) and ${layout.tarball} (the whole folder, raw data included). perf.data ` +
          'and target/ are never changed; run it again at any time, anywhere perf is installed.',
      )
      .example(
        '$0 postprocess --dir out --title "checkout service"',
        'With a title',
      ) as unknown as Argv<PostprocessArgs>,
  handler: async (args: ArgumentsCamelCase<PostprocessArgs>) => {
    const reporter = createReporter({ quiet: args.quiet });
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    try {
      reporter.info(`post-processing ${args.dir}`);
      const result = await postprocess(args.dir, toOptions(args), {
        signal: controller.signal,
        warn: reporter.warn,
        progress: reporter.info,
      });
      process.stdout.write(summary(result));
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // In the sidecar, the folder is the user's (PROFCPU_OUTPUT_OWNER, set by the launcher): so are its new files.
      const { owner } = sidecarSettings(process.env, reporter);
      if (owner) await giveFolder(args.dir, owner, reporter);
    }
  },
};

async function giveFolder(dir: string, owner: { uid: number; gid: number }, reporter: Reporter): Promise<void> {
  const folder = await OutputFolder.open(dir).catch(() => undefined);
  await folder
    ?.chownTree(owner)
    .catch((error: unknown) => reporter.warn(`cannot give ${dir} to uid ${owner.uid}: ${String(error)}`));
  await folder?.close();
}

function summary(result: PostprocessResult): string {
  const { fold } = result;
  const lines = [
    `${fold.keptSamples} samples kept of ${fold.samples}, ${fold.stacks.size} distinct stacks; files written:`,
    ...Object.keys(result.files)
      .sort()
      .map((name) => `  ${relative(process.cwd(), result.files[name]!)}`),
  ];
  const perfScript = result.files[layout.perfScript];
  if (perfScript) lines.push(`FlameScope: point it at the folder ${relative(process.cwd(), dirname(perfScript))}/`);
  return `${lines.join('\n')}\n`;
}

export default command;

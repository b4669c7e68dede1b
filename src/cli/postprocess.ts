// `profcpu postprocess D` (or `-dir D`, `--dir D`): turns an output folder holding perf.data into the flame graphs,
// FlameScope text, folded stacks, speedscope file, manifest and tarball. D may also be a prof.tar.gz somebody sent:
// it is unpacked into a new folder first (src/output/unpack.ts: untrusted, checked entry by entry), next to it or
// at --out DIR, and that folder is post-processed. Flags map onto PostprocessOptions in `toOptions`; progress and
// warnings go to stderr, the list of files written to stdout. Ctrl-C or SIGTERM stops perf script (or the unpacking)
// and removes half-written outputs; perf.data is always kept. The built-in engine (profcpu's own perf.data reader) is the
// default; `--engine perf` with no perf installed stops with the remedy.
import { stat } from 'node:fs/promises';
import { dirname, relative } from 'node:path';
import { isInstalled } from '../perf/select.js';
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { layout } from '../output/layout.js';
import { defaultUnpackLimits as unpackLimits } from '../output/unpack-limits.js';
import { ProfcpuError } from '../error.js';
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
import { sidecarSettings } from './sidecar-settings.js';
import { createReporter, type Reporter } from './reporter.js';
import { minBlockOption, parseMinBlock } from './min-block.js';
import { offCpuSummary } from './offcpu-summary.js';

interface PostprocessArgs extends FoldFlagArgs {
  /** The positional folder or archive. */
  input?: string;
  dir?: string;
  out?: string;
  title?: string;
  colors?: string;
  width?: number;
  perf: string;
  engine?: Engine;
  force: boolean;
  tarball: boolean;
  minBlock?: string;
  quiet: boolean;
}

/** Maps the command line onto the pipeline's options. */
export function toOptions(args: Omit<PostprocessArgs, 'input' | 'dir' | 'out' | 'quiet'>): Partial<PostprocessOptions> {
  return {
    fold: foldFlagOptions(args, 'postprocess'),
    title: args.title,
    svg: {
      ...(args.colors === undefined ? {} : { colors: args.colors as PaletteName }),
      ...(args.width === undefined ? {} : { width: args.width }),
    },
    perfPath: args.perf,
    ...(args.engine !== undefined && { engine: args.engine }),
    force: args.force,
    tarball: args.tarball,
    ...(args.minBlock !== undefined && {
      offCpu: { ...defaultPostprocessOptions.offCpu, minBlockUs: parseMinBlock(args.minBlock) },
    }),
  };
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, PostprocessArgs> = {
  builder: (yargs: Argv) =>
    withFoldFlags(
      yargs
        .positional('input', {
          type: 'string',
          describe: 'The folder holding perf.data, or a prof.tar.gz to unpack and post-process (same as --dir)',
        })
        .option('dir', {
          type: 'string',
          describe:
            'Output folder holding perf.data (and collect’s target/ snapshots), or a prof.tar.gz; outputs are ' +
            'written in the folder',
          requiresArg: true,
        })
        .option('out', {
          type: 'string',
          describe:
            'For a prof.tar.gz: the new folder to unpack it into (default: its top folder’s name, next to the archive)',
          requiresArg: true,
        })
        .check((args) => {
          const usage = (message: string) =>
            new ProfcpuError('USAGE', message, { remedy: 'See `profcpu postprocess --help`.' });
          if (args.input !== undefined && args.dir !== undefined && args.input !== args.dir)
            throw usage('Give the folder (or prof.tar.gz) once: as an argument or with --dir, not both');
          if (args.input === undefined && args.dir === undefined)
            throw usage('Name the folder holding perf.data, or a prof.tar.gz: postprocess DIR (or --dir DIR)');
          return true;
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
        describe:
          'Who reads perf.data: perf script, or profcpu itself (no perf needed). Default: profcpu itself, which ' +
          'unwinds DWARF call graphs itself (saying so) and hands to perf script, saying why, a recording it does ' +
          'not read as perf does (LBR call graphs, hardware trace, another machine’s DWARF call graphs)',
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
      .option('min-block', minBlockOption)
      .option('quiet', { type: 'boolean', default: false, alias: 'q', describe: 'No progress lines' })
      .example(
        '$0 postprocess -dir profilings/15-02-11_2026-11-22',
        'Re-render a recording (the original tool’s single-dash options)',
      )
      .example(
        'npx profcpu postprocess prof.tar.gz',
        'Unpack a tarball somebody sent into a new folder next to it, and render it there (Node alone: no perf needed)',
      )
      .epilogue(
        `Writes into the folder: ${layout.flamegraphSvg} (open in a browser), ${layout.flamegraphHtml} (offline ` +
          `d3-flame-graph), ${layout.speedscope} (speedscope.app), ${layout.pprof} (pprof: Pyroscope, Parca, go tool ` +
          `pprof), ${layout.foldedStacks} (flamegraph.pl/inferno ` +
          `input), ${layout.perfScript} (perf script text with times: FlameScope lists every file of the folder it ` +
          `is given, so point it at ${dirname(layout.perfScript)}/ alone), for a recording made with collect ` +
          `--off-cpu ${layout.offCpuSvg} and ${layout.wallClockSvg} (where the threads waited; each thread's time ` +
          `running, blocked and waiting for a CPU) with their HTML, folded, speedscope and pprof files, ${layout.manifest} (versions, commands, ` +
          `counts, SHA-256 of each file) and ${layout.tarball} (the whole folder, raw data included). perf.data ` +
          'and target/ are never changed; run it again at any time, anywhere. A prof.tar.gz is untrusted: only its ' +
          'files and folders named as in an output folder are unpacked (no links, devices, absolute paths or ..; ' +
          `at most ${unpackLimits.maxEntries} entries, ${unpackLimits.maxBytes / 1024 ** 3} GiB and ` +
          `${unpackLimits.deadlineMs / 60_000} minutes), into a new folder that must not exist yet.`,
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
    let dir: string | undefined;
    try {
      const engine = await chooseEngine(args.engine, args.perf);
      dir = await folderOf(args.input ?? args.dir!, args.out, controller.signal, reporter);
      reporter.info(`post-processing ${dir}`);
      const result = await postprocess(
        dir,
        { ...toOptions(args), engine },
        {
          signal: controller.signal,
          warn: reporter.warn,
          progress: reporter.info,
        },
      );
      process.stdout.write(summary(result, Boolean(args.eventFilter)));
    } finally {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      // In the sidecar, the folder is the user's (PROFCPU_OUTPUT_OWNER, set by the launcher): so are its new files.
      const { owner } = sidecarSettings(process.env, reporter);
      if (owner && dir !== undefined) await giveFolder(dir, owner, reporter);
    }
  },
};

/** The folder to post-process: `input` itself, or the new folder a prof.tar.gz (any file given) is unpacked into. */
async function folderOf(
  input: string,
  out: string | undefined,
  signal: AbortSignal,
  reporter: Reporter,
): Promise<string> {
  const info = await stat(input).catch(() => undefined);
  if (!info || info.isDirectory()) {
    if (out !== undefined)
      throw new ProfcpuError('USAGE', `--out is for a prof.tar.gz; ${input} is a folder`, {
        remedy: `Outputs are written in the folder itself: \`profcpu postprocess ${input}\`.`,
      });
    return input;
  }
  reporter.info(`unpacking ${input}`);
  // The archive code (node-tar's parser) loads only for an archive.
  const { unpackTarball } = await import('../output/unpack.js');
  const unpacked = await unpackTarball(input, { ...(out !== undefined && { into: out }), signal, warn: reporter.warn });
  const megabytes = (unpacked.bytes / 1024 ** 2).toFixed(1);
  reporter.info(`unpacked ${input} into ${unpacked.dir} (${unpacked.files} files, ${megabytes} MB)`);
  return relative(process.cwd(), unpacked.dir) || '.';
}

/** The engine asked for, or the default. `--engine perf` with no perf installed is an error that says what to do. */
async function chooseEngine(asked: Engine | undefined, perfPath: string): Promise<Engine | 'auto'> {
  const engine = asked ?? defaultPostprocessOptions.engine;
  if (engine === 'perf' && !(await isInstalled(perfPath)))
    throw new ProfcpuError('NO_PERF', `--engine perf was asked, but perf was not found (${perfPath})`, {
      remedy:
        'Install perf (Debian: apt-get install linux-perf) or pass --perf PATH; or use --engine native, which reads ' +
        'perf.data itself.',
    });
  return engine;
}

async function giveFolder(dir: string, owner: { uid: number; gid: number }, reporter: Reporter): Promise<void> {
  const folder = await OutputFolder.open(dir).catch(() => undefined);
  await folder
    ?.chownTree(owner)
    .catch((error: unknown) => reporter.warn(`cannot give ${dir} to uid ${owner.uid}: ${String(error)}`));
  await folder?.close();
}

function summary(result: PostprocessResult, filtered: boolean): string {
  const { fold } = result;
  const lines = [
    `${fold.keptSamples} samples kept of ${fold.samples}, ${fold.stacks.size} distinct stacks; files written:`,
    ...Object.keys(result.files)
      .sort()
      .map((name) => `  ${relative(process.cwd(), result.files[name]!)}`),
  ];
  lines.push(...eventLines(result, filtered), ...jitNameLines(result));
  if (result.offCpu) lines.push(...offCpuSummary(result.offCpu));
  const perfScript = result.files[layout.perfScript];
  if (perfScript) lines.push(`FlameScope: point it at the folder ${relative(process.cwd(), dirname(perfScript))}/`);
  return `${lines.join('\n')}\n`;
}

/** With several events: which was folded, and the samples of the others left out. */
function eventLines(result: PostprocessResult, filtered: boolean): string[] {
  const { events, eventSamples, foldedEvent } = result.fold;
  if (events.length < 2 || foldedEvent === undefined) return [];
  const others = events.filter((event) => event !== foldedEvent);
  const left = others.map((event) => `${eventSamples[event] ?? 0} samples of ${event}`).join(', ');
  const why = filtered ? 'asked for by --event-filter' : 'the first event seen; --event-filter NAME folds another';
  return [`folded the samples of ${foldedEvent} (${why}); left out ${left}`];
}

/** Where JIT frames were named from, one line per perf map read or placed. */
function jitNameLines(result: PostprocessResult): string[] {
  const { jitMaps = [], perfMaps } = result.manifest.postprocess;
  const origin = {
    snapshot: 'collect’s snapshot',
    folder: 'the copy beside perf.data',
    machine: 'this machine, as perf reads it',
  };
  return [
    ...jitMaps.map(
      (map) => `JIT names of process ${map.pid}: ${map.file} (${origin[map.origin]}, ${map.symbols} entries)`,
    ),
    ...perfMaps.map((map) => `JIT names: ${map.from} placed at ${map.placedAt} for perf script`),
  ];
}

export default command;

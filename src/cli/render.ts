// `profcpu render [FILE|-] --format svg|html|speedscope|pprof`: folded stacks from a file or stdin to a flame graph,
// a speedscope file or a pprof profile on stdout or --output. The flags map onto the render stage's options in
// renderOptionsFromArgs.
import { open, writeFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { Argv, CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';
import { paletteNames, render, renderFormats, type RenderFormat, type RenderOptions } from '../render/index.js';
import { renderPprof, type PprofSampleType } from '../render/pprof.js';
import { defaultSvgOptions } from '../render/svg.js';
import { parseFolded } from '../stacks/folded.js';
import { createReporter } from './reporter.js';

/** The formats `render` writes: the render stage's text formats, and pprof (binary, gzipped). */
type CliFormat = RenderFormat | 'pprof';

export interface RenderArgs {
  file?: string;
  format: CliFormat;
  output?: string;
  title?: string;
  subtitle?: string;
  width?: number;
  height?: number;
  minwidth?: string;
  colors?: string;
  seed?: number;
  reverse?: boolean;
  inverted?: boolean;
  countname?: string;
  sampleType?: string;
  quiet?: boolean;
}

/** `--sample-type cpu/nanoseconds`: what a pprof sample's value measures (default samples/count). */
export function pprofSampleType(text: string | undefined): PprofSampleType {
  if (text === undefined) return { type: 'samples', unit: 'count', perWeight: 1 };
  const match = /^([A-Za-z_][\w.-]{0,63})\/([A-Za-z_][\w.-]{0,63})$/.exec(text);
  if (!match) throw usage(`--sample-type must be TYPE/UNIT, such as cpu/nanoseconds or samples/count, not "${text}"`);
  return { type: match[1]!, unit: match[2]!, perWeight: 1 };
}

/** The render stage's options for these flags; throws USAGE for values no renderer can use. */
export function renderOptionsFromArgs(args: RenderArgs): RenderOptions {
  const options: RenderOptions = {};
  if (args.title !== undefined) {
    options.title = args.title;
    options.name = args.title;
  }
  if (args.subtitle !== undefined) options.subtitle = args.subtitle;
  if (args.width !== undefined) options.width = positive('--width', args.width);
  if (args.height !== undefined) options.frameHeight = positive('--height', args.height);
  if (args.minwidth !== undefined) {
    const width = options.width ?? defaultSvgOptions.width;
    options.minWidth = parseMinWidth(args.minwidth, width);
    options.minFrameSize = options.minWidth;
  }
  if (args.colors !== undefined) options.colors = args.colors as RenderOptions['colors'];
  if (args.seed !== undefined) {
    if (!Number.isInteger(args.seed)) throw usage(`--seed must be an integer, not ${args.seed}`);
    options.seed = args.seed;
  }
  if (args.reverse) options.reverse = true;
  if (args.inverted) options.inverted = true;
  if (args.countname !== undefined) options.countName = args.countname;
  return options;
}

function positive(flag: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw usage(`${flag} must be a positive number, not ${value}`);
  return value;
}

/** `0.1` is pixels; `0.5%` is a percentage of the image width (less its margins), as inferno accepts. */
function parseMinWidth(text: string, width: number): number {
  const percent = text.endsWith('%');
  const value = Number(percent ? text.slice(0, -1) : text);
  if (text.trim() === '' || !Number.isFinite(value) || value < 0)
    throw usage(`--minwidth must be a number of pixels or a percentage such as 0.5%, not "${text}"`);
  return percent ? ((width - 20) * value) / 100 : value;
}

function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, { remedy: 'See `profcpu render --help`.' });
}

async function readInput(name: string | undefined): Promise<{ stacks: Map<string, number>; skipped: number }> {
  let input: Readable = process.stdin;
  if (name !== undefined) {
    try {
      input = (await open(name, 'r')).createReadStream();
    } catch (cause) {
      throw new ProfcpuError('IO', `cannot read ${name}: ${(cause as Error).message}`, {
        remedy: 'Check the path, or pipe folded stacks (`frame;frame;frame count` lines) into `profcpu render -`.',
        cause,
      });
    }
  }
  return parseFolded(createInterface({ input, crlfDelay: Infinity }));
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, RenderArgs> = {
  builder: (yargs: Argv) =>
    yargs
      .positional('file', { type: 'string', describe: 'Folded stacks (`a;b;c 12` lines); - or nothing reads stdin' })
      .option('format', {
        alias: 'f',
        choices: [...renderFormats, 'pprof'],
        default: 'svg' as CliFormat,
        describe: 'Output format (pprof: gzipped profile.proto, binary)',
      })
      .option('output', { alias: 'o', type: 'string', describe: 'Write to this file instead of stdout' })
      .option('title', { type: 'string', describe: 'Title (speedscope: profile name)' })
      .option('subtitle', { type: 'string', describe: 'Second line under the title' })
      .option('width', { type: 'number', describe: 'Image width in pixels (svg 1200; html: window width)' })
      .option('height', { type: 'number', describe: 'Frame height in pixels (svg 16, html 18)' })
      .option('minwidth', { type: 'string', describe: 'Narrowest frame drawn, pixels or percent (svg 0.1, html 0.5)' })
      .option('colors', { choices: paletteNames, describe: 'Palette (dotnet: managed/native/kernel/unknown)' })
      .option('seed', { type: 'number', describe: 'Seed of the colour hash (0)' })
      .option('reverse', { type: 'boolean', describe: 'Reverse stacks: leaf functions at the root' })
      .option('inverted', { type: 'boolean', describe: 'Icicle graph: root at the top' })
      .option('countname', { type: 'string', describe: 'What counts measure, for tooltips (samples)' })
      .option('sample-type', {
        type: 'string',
        describe: 'pprof: what the counts measure, TYPE/UNIT (samples/count; cpu/nanoseconds...)',
      })
      .option('quiet', {
        alias: 'q',
        type: 'boolean',
        describe: 'No progress messages',
      }) as unknown as Argv<RenderArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const options = renderOptionsFromArgs(args);
    const sampleType = pprofSampleType(args.sampleType);
    if (args.sampleType !== undefined && args.format !== 'pprof') throw usage('--sample-type is for --format pprof');
    if (args.format === 'pprof' && args.output === undefined && process.stdout.isTTY)
      throw usage('a pprof profile is binary: pass --output FILE, or redirect standard output to a file');
    // yargs hands a lone `-` over as ''.
    const file = args.file === undefined || args.file === '-' || args.file === '' ? undefined : args.file;
    const input = await readInput(file);
    const source = file ?? 'standard input';
    if (input.skipped > 0) reporter.warn(`skipped ${input.skipped} line(s) of ${source} that are not "stack count"`);
    let total = 0;
    for (const weight of input.stacks.values()) total += weight;
    if (total <= 0)
      throw new ProfcpuError('NO_SAMPLES', `no stack with a positive count in ${source}`, {
        remedy: 'Pass folded stacks, one `frame;frame;frame count` line per stack, as `profcpu fold` writes them.',
      });
    const text =
      args.format === 'pprof'
        ? renderPprof(input.stacks, { sampleTypes: [sampleType] })
        : render(args.format, input.stacks, options);
    if (args.output === undefined) {
      process.stdout.write(text);
      return;
    }
    try {
      await writeFile(args.output, text);
    } catch (cause) {
      throw new ProfcpuError('IO', `cannot write ${args.output}: ${(cause as Error).message}`, {
        remedy: 'Choose a writable path for --output.',
        cause,
      });
    }
    reporter.info(`wrote ${args.output} (${args.format}, ${input.stacks.size} distinct stacks)`);
  },
};

export default command;

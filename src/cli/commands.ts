// The list of commands (each loaded only when run), and the long option names that may also be written with one
// dash, as the original shell tool took them (`-pid 1`).
import type { CommandModule } from 'yargs';

/**
 * A command as `profcpu --help` lists it, and the file that runs it: loaded only when that command is run, so that
 * `profcpu --version` or `profcpu fold` does not load perf, .NET and rendering code it does not use.
 */
export interface CommandEntry {
  /** Its name and positional arguments, as yargs takes them (`fold [file]`). */
  command: string;
  describe: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  load: () => Promise<{ default: CommandModule<any, any> }>;
}

export const commands: readonly CommandEntry[] = [
  {
    command: 'collect',
    describe: 'Record a process with perf, then post-process it into flame graphs and a tarball',
    load: () => import('./collect.js'),
  },
  {
    command: 'watch',
    describe: 'Stay running and profile by itself when a rule says so (CPU above a threshold, a schedule, on demand)',
    load: () => import('./watch.js'),
  },
  {
    command: 'postprocess [input]',
    describe:
      'Turn a folder holding perf.data (or a prof.tar.gz) into flame graphs, FlameScope text, speedscope JSON, manifest and tarball',
    load: () => import('./postprocess.js'),
  },
  {
    command: 'dump',
    describe: 'Have a .NET process write a dump over its diagnostic socket and move it out of the container',
    load: () => import('./dump.js'),
  },
  {
    command: 'demo',
    describe:
      'Profile a bundled CPU-burning workload (.NET when an SDK is found, else Node.js) and write a full output folder',
    load: () => import('./demo.js'),
  },
  {
    command: 'doctor',
    describe: 'Check that perf can profile the target from here (exit 0 ok, 3 warnings, 1 fatal)',
    load: () => import('./doctor.js'),
  },
  {
    command: 'ps',
    describe: 'List the visible processes worth profiling (.NET, or with a perf map)',
    load: () => import('./ps.js'),
  },
  {
    command: 'symbols',
    describe: 'Fetch debug files by build-id and place them where perf finds them',
    load: () => import('./symbols.js'),
  },
  {
    command: 'fold [file]',
    describe: 'Fold `perf script` text into folded stacks (frame;frame;frame count), sorted, on stdout',
    load: () => import('./fold.js'),
  },
  {
    command: 'diff <before> <after>',
    describe: 'Compare two profiles: a differential flame graph and the frames whose shares moved most',
    load: () => import('./diff.js'),
  },
  {
    command: 'render [file]',
    describe: 'Draw folded stacks as an SVG flame graph, an offline HTML page or a speedscope file',
    load: () => import('./render.js'),
  },
];

/** Long options accepted with a single dash, as the original shell tool spelled them. */
export const singleDashOptions: ReadonlySet<string> = new Set([
  'pid',
  'duration',
  'dir',
  'frequency',
  'output',
  'event',
  'name',
  'quiet',
  'perfmap',
  'symbols',
  'format',
  'title',
  'width',
  'perf',
  'offline',
  'rules',
  'type',
  'timeout',
  'max-size',
  'unwind',
  'stack-size',
  'off-cpu',
  'min-block',
]);

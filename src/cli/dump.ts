// `profcpu dump`: flags in, a .NET dump in an output folder out (path and size on stdout), with progress on stderr.
// Ctrl-C (or SIGTERM) stops at once: no partial copy is left under the dump's name, the target's file is removed; while
// the runtime is still writing, it is waited for so that its file can be removed, unless Ctrl-C comes again.
import type { Argv, CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';
import { dumpTypeNames, type DumpTypeName } from '../dotnet/ipc/dump-protocol.js';
import { mib } from '../dump/fetch-dump.js';
import { dumpDefaults, takeDump } from '../dump/take-dump.js';
import { defaultOutputDir } from '../collect/options.js';
import { sidecarSettings } from './sidecar-settings.js';
import { exitNow } from './signals.js';
import { createReporter, type Reporter } from './reporter.js';

/** The longest delay setTimeout keeps, ms. */
const maxTimerMs = 2 ** 31 - 1;

interface DumpArgs {
  pid?: number;
  name?: string;
  type: DumpTypeName;
  output?: string;
  maxSize: number;
  timeout: number;
  quiet: boolean;
}

/** Copy progress: one line redrawn on a terminal (10 times a second at most); otherwise a plain line every 10 %, 2 s apart at most, and the last. */
function copyProgress(reporter: Reporter, quiet: boolean) {
  let drawn = false;
  let lastTenth = -1;
  let lastPlain = -Infinity;
  let lastDrawn = -Infinity;
  let started: number | undefined;
  return {
    update(copied: number, total: number) {
      if (quiet) return;
      const now = performance.now();
      started ??= now;
      const share = total > 0 ? copied / total : 1;
      const seconds = (now - started) / 1000;
      const rate = seconds > 0.1 ? `, ${(copied / 1024 ** 2 / seconds).toFixed(0)} MiB/s` : '';
      const text = `copying the dump: ${mib(copied)} of ${mib(total)} (${Math.floor(share * 100)} %${rate})`;
      if (reporter.interactive) {
        // Ten redraws a second at most: a chunk is 1 MiB, and a dump can be tens of GiB.
        if (now - lastDrawn < 100 && copied !== total) return;
        lastDrawn = now;
        process.stderr.write(`\r${text}\x1b[K`);
        drawn = true;
      } else if (copied === total || (Math.floor(share * 10) > lastTenth && now - lastPlain >= 2000)) {
        lastTenth = Math.floor(share * 10);
        lastPlain = now;
        reporter.info(text);
      }
    },
    end() {
      if (drawn) process.stderr.write('\r\x1b[K');
      drawn = false;
    },
  };
}

/** While the runtime writes the dump: the seconds waited, redrawn each second on a terminal, else every 30 s. */
function writingProgress(reporter: Reporter, quiet: boolean) {
  let timer: NodeJS.Timeout | undefined;
  let drawn = false;
  const started = performance.now();
  return {
    start() {
      if (quiet) return;
      timer = setInterval(
        () => {
          const text = `the runtime is writing the dump: ${Math.round((performance.now() - started) / 1000)} s`;
          if (reporter.interactive) {
            process.stderr.write(`\r${text}\x1b[K`);
            drawn = true;
          } else reporter.info(text);
        },
        reporter.interactive ? 1000 : 30_000,
      );
      timer.unref();
    },
    /** Erases the line drawn, before another line is printed; the count goes on. */
    erase() {
      if (drawn) process.stderr.write('\r\x1b[K');
      drawn = false;
    },
    end() {
      clearInterval(timer);
      this.erase();
    },
  };
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, DumpArgs> = {
  builder: (yargs) =>
    yargs
      .option('pid', { type: 'number', describe: 'PID to dump (default: the only .NET process visible, else 1)' })
      .option('name', { type: 'string', describe: 'Dump the process with this name (comm, executable or dll name)' })
      .option('type', {
        choices: dumpTypeNames,
        default: dumpDefaults.type,
        describe:
          'mini: threads, stacks and modules; heap: mini plus the managed heap; triage: mini with personal data removed; full: all memory',
      })
      .option('output', {
        type: 'string',
        describe: 'Folder for the dump and its manifest.json (default profilings/dump_HH-MM-SS_YYYY-MM-DD)',
      })
      .option('max-size', {
        type: 'number',
        default: dumpDefaults.copy.maxBytes / 1024 ** 2,
        describe: 'MiB copied at most; a larger dump is refused (the output folder must also have room for it)',
      })
      .option('timeout', {
        type: 'number',
        default: dumpDefaults.dumpTimeoutMs / 1000,
        describe:
          'Seconds the runtime may take to write the dump (Ctrl-C meanwhile waits for it within that time, to remove its file)',
      })
      .option('quiet', { type: 'boolean', default: false, describe: 'Print only warnings, errors and the result' })
      .conflicts('pid', 'name')
      .check((args) => {
        if (args.pid !== undefined && !(Number.isInteger(args.pid) && Number(args.pid) > 0))
          throw usage('--pid must be a positive integer');
        if (!(Number(args['max-size']) > 0)) throw usage('--max-size must be a positive number of MiB');
        if (!(Number(args.timeout) > 0)) throw usage('--timeout must be a positive number of seconds');
        // A timer longer than 2^31-1 ms fires at once (Node clamps it to 1 ms).
        if (Number(args.timeout) * 1000 > maxTimerMs)
          throw usage(`--timeout must be at most ${Math.floor(maxTimerMs / 1000)} seconds (24.8 days)`);
        return true;
      }) as unknown as Argv<DumpArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const sidecar = sidecarSettings(process.env, reporter);
    const abort = new AbortController();
    const abandon = new AbortController();
    const onSignal = (name: NodeJS.Signals) => {
      // One more after that ends profcpu at once, even when a read of the dump never returns.
      if (abandon.signal.aborted) exitNow(reporter, name);
      // The second stops waiting for a runtime still writing the dump (take-dump.ts says where its file is left).
      if (abort.signal.aborted) return abandon.abort();
      writing.end();
      progress.end();
      reporter.warn(`${name}: stopping; no partial dump is kept`);
      abort.abort();
    };
    const progress = copyProgress(reporter, args.quiet);
    const writing = writingProgress(reporter, args.quiet);
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    try {
      const output = args.output ?? defaultOutputDir(process.cwd(), new Date()).replace(/([^/]+)$/, 'dump_$1');
      const result = await takeDump(
        {
          ...(args.pid !== undefined && { pid: args.pid }),
          ...(args.name !== undefined && { name: args.name }),
          ...(sidecar.owner && { owner: sidecar.owner }),
          type: args.type,
          output,
          dumpTimeoutMs: Math.round(args.timeout * 1000),
          copy: { ...dumpDefaults.copy, maxBytes: Math.round(args.maxSize * 1024 ** 2) },
        },
        {
          signal: abort.signal,
          abandon: abandon.signal,
          warn: (m) => {
            writing.erase();
            progress.end();
            reporter.warn(m);
          },
          info: (m) => {
            writing.erase();
            progress.end();
            reporter.info(m);
          },
          onPhase: (phase) => (phase === 'writing' ? writing.start() : writing.end()),
          onCopyProgress: (copied, total) => progress.update(copied, total),
        },
      );
      progress.end();
      const { entry } = result;
      const shown = sidecar.showPath?.(result.path) ?? result.path;
      process.stdout.write(
        `${shown}\n  ${entry.type} dump, ${mib(entry.bytes)}; written by the runtime in ${(entry.durationsMs.dump / 1000).toFixed(1)} s (${entry.command}), copied in ${(entry.durationsMs.copy / 1000).toFixed(1)} s\n`,
      );
    } finally {
      writing.end();
      progress.end();
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    }
  },
};

export default command;

function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, { remedy: 'Give each option once, with a valid value; see --help.' });
}

// `profcpu collect`: flags in, a recorded and post-processed output folder out, with progress on stderr and the
// one-screen summary on stdout. The first Ctrl-C (or SIGTERM) stops the recording early and still post-processes;
// a second one aborts post-processing and leaves the raw data.
import { ProfcpuError } from '../error.js';
import type { Argv, CommandModule } from 'yargs';
import { collect, type CollectPhase, type RecordingProgress } from '../collect/session.js';
import { collectDefaults, type CollectOptions } from '../collect/options.js';
import type { UnwindRequest } from '../collect/unwind-choice.js';
import type { CollectStep } from '../step/step.js';
import { formatSummary } from './collect-summary.js';
import { chosenSteps } from '../collect/registry.js';
import type { PerfMapMode } from '../dotnet/perfmap/perfmap-session.js';
import { postprocess } from '../postprocess/postprocess.js';
import { symbolsModes, symbolsStepDefaults, type SymbolsMode } from '../debug-files/symbols-step.js';
import { choosePerf } from '../perf/select.js';
import { stackCopyLimits, switchStackBytes } from '../perf/record.js';
import { microsoftSymbolServer, symbolServerList } from '../debug-files/symbol-server.js';
import { createReporter, type Reporter } from './reporter.js';
import { exitNow } from './signals.js';
import { sidecarSettings } from './sidecar-settings.js';
import { minBlockOption, parseMinBlock } from './min-block.js';
import { autoStacksPerSecond, type SwitchShareRequest } from '../collect/switch-share.js';

export interface CollectArgs {
  pid?: number;
  name?: string;
  duration: number;
  frequency: number;
  unwind: UnwindRequest;
  stackSize?: number;
  switchStackSize?: number;
  switchShare?: string;
  offCpu: boolean;
  minBlock?: string;
  output?: string;
  event?: string;
  perf?: string;
  postprocess: boolean;
  perfmap: PerfMapMode;
  symbols: SymbolsMode;
  symbolServer?: string[];
  offline: boolean;
  snapshotLimit: number;
  targetTimeout: number;
  scope: 'auto' | 'process' | 'cgroup';
  quiet: boolean;
}

export function collectOptions<T>(yargs: Argv<T>) {
  return yargs
    .option('pid', { type: 'number', describe: 'PID to profile (default: the only .NET process visible, else 1)' })
    .option('name', { type: 'string', describe: 'Profile the process with this name (comm, executable or dll name)' })
    .option('duration', { type: 'number', default: collectDefaults.durationSeconds, describe: 'Seconds to record' })
    .option('frequency', { type: 'number', default: collectDefaults.frequency, describe: 'Samples per second' })
    .option('unwind', {
      choices: ['auto', 'fp', 'mixed'] as const,
      default: collectDefaults.unwind,
      describe:
        'How stacks are unwound: fp, by frame pointer (callers of code built without them, glibc’s, are lost); ' +
        'mixed, from a copy of each sample’s stack, by CFI where the code has it and by frame pointer through JIT ' +
        'code (complete stacks; perf.data compressed when perf can); auto, mixed when the copies fit a disk budget',
    })
    .option('stack-size', {
      type: 'number',
      describe:
        `Bytes of stack copied in each sample when unwinding is mixed (default ${collectDefaults.stackBytes}, ` +
        `up to ${stackCopyLimits.max})`,
    })
    .option('off-cpu', {
      type: 'boolean',
      default: collectDefaults.offCpu,
      describe:
        'Record where the target’s threads wait too (every switch off the CPU, with its stack): an off-CPU flame ' +
        'graph in microseconds blocked beside the CPU one',
    })
    .option('switch-stack-size', {
      type: 'number',
      describe:
        `With --off-cpu and mixed unwinding: bytes of stack copied at each switch off the CPU (default ` +
        `${switchStackBytes}, or --stack-size when smaller; up to ${stackCopyLimits.max}). Larger reaches deeper waits ` +
        'whole, at a cost at every switch',
    })
    .option('switch-share', {
      type: 'string',
      describe:
        "With --off-cpu: the percentage of the time the switches' stacks are taken, in random windows of 20 to 60 ms; " +
        "100 takes every one. Each thread's time blocked is still measured whole, its stacks weighed to it. Default " +
        `auto: every one for a target that blocks up to ${autoStacksPerSecond} times a second, about that many stacks a ` +
        'second above',
    })
    .option('min-block', minBlockOption)
    .option('output', { type: 'string', describe: 'Output folder (default profilings/HH-MM-SS_YYYY-MM-DD)' })
    .option('event', { type: 'string', describe: 'Perf event (default: cycles where available, else cpu-clock)' })
    .option('postprocess', {
      type: 'boolean',
      default: true,
      describe: 'Post-process after recording (--no-postprocess to skip)',
    })
    .option('perfmap', {
      choices: ['auto', 'on', 'off'] as const,
      default: 'auto' as const,
      describe: '.NET: switch the perf map on over the diagnostic socket while recording (auto: when it is off)',
    })
    .option('symbols', {
      choices: symbolsModes,
      default: symbolsStepDefaults.mode,
      describe:
        'Fetch debug files by build-id after recording, for what lacks symbols: sampled: libcoreclr.so and every ' +
        `native library perf sampled (libc, libstdc++, libclrjit...; ${symbolsStepDefaults.maxLibraries} at most); ` +
        'coreclr: libcoreclr.so; all: every mapped native library; none',
    })
    .option('symbol-server', {
      type: 'string',
      array: true,
      describe: `Symbol server to ask, in order (repeatable); default PROFCPU_SYMBOL_SERVERS, else DEBUGINFOD_URLS then ${microsoftSymbolServer}`,
    })
    .option('offline', { type: 'boolean', default: false, describe: 'Ask no symbol server: use the cache only' })
    .option('perf', {
      type: 'string',
      describe: 'perf executable (default: of /opt/perf/<version>/perf and the one on PATH, the closest to the kernel)',
    })
    .option('scope', {
      choices: ['auto', 'process', 'cgroup'] as const,
      default: 'auto' as const,
      describe:
        'What perf records: the process (-p), every CPU filtered to its cgroup (-a -G), or auto: the cgroup when the perf at hand spins on exited threads (before 7.2) and the target has a cgroup of its own',
    })
    .option('snapshot-limit', {
      type: 'number',
      default: collectDefaults.snapshotMaxBytes / (1 << 20),
      describe:
        'MiB copied at most from the target’s perf map and from its jitdump (a bound a hostile target cannot lift)',
    })
    .option('target-timeout', {
      type: 'number',
      default: collectDefaults.targetTimeoutSeconds,
      describe:
        'Seconds one pass reading the target’s files or memory may take; past it the reader process is killed and ' +
        'the session reads nothing more from the target; perf gets as long to start and to stop (a hung FUSE mount ' +
        'cannot hold profcpu)',
    })
    .option('quiet', { type: 'boolean', default: false, describe: 'Print only warnings, errors and the summary' })
    .conflicts('pid', 'name')
    .check((args) => {
      if (!(Number(args.duration) > 0)) throw usage('--duration must be a positive number of seconds');
      if (!(Number(args.frequency) > 0)) throw usage('--frequency must be a positive number of Hz');
      if (args['stack-size'] !== undefined) {
        const stack = Number(args['stack-size']);
        if (!(Number.isInteger(stack) && stack >= stackCopyLimits.min && stack <= stackCopyLimits.max))
          throw usage(
            `--stack-size must be a whole number of bytes from ${stackCopyLimits.min} to ${stackCopyLimits.max}`,
          );
        if (args.unwind === 'fp')
          throw usage('--stack-size sizes the stack copies of mixed unwinding, not --unwind fp');
      }
      if (args['switch-stack-size'] !== undefined) {
        const stack = Number(args['switch-stack-size']);
        if (!(Number.isInteger(stack) && stack >= stackCopyLimits.min && stack <= stackCopyLimits.max))
          throw usage(
            `--switch-stack-size must be a whole number of bytes from ${stackCopyLimits.min} to ${stackCopyLimits.max}`,
          );
        if (!args['off-cpu']) throw usage('--switch-stack-size goes with --off-cpu');
        if (args.unwind === 'fp')
          throw usage('--switch-stack-size sizes the stack copies of mixed unwinding, not --unwind fp');
      }
      if (args['switch-share'] !== undefined) {
        parseSwitchShare(String(args['switch-share']));
        if (!args['off-cpu']) throw usage('--switch-share goes with --off-cpu');
      }
      if (args['min-block'] !== undefined) {
        parseMinBlock(String(args['min-block']));
        if (!args['off-cpu']) throw usage('--min-block goes with --off-cpu');
      }
      if (!(Number(args['snapshot-limit']) > 0)) throw usage('--snapshot-limit must be a positive number of MiB');
      if (!(Number(args['target-timeout']) > 0)) throw usage('--target-timeout must be a positive number of seconds');
      if (args.pid !== undefined && !(Number.isInteger(args.pid) && Number(args.pid) > 0))
        throw usage('--pid must be a positive integer');
      return true;
    });
}

/**
 * Traps SIGINT/SIGTERM for the session: first = stop recording (or abort if not recording), second = abort, one more
 * = end at once (exitNow).
 */
export function trapSignals(reporter: Reporter, phase: () => CollectPhase | undefined) {
  const stop = new AbortController();
  const abort = new AbortController();
  const onSignal = (name: NodeJS.Signals) => {
    if (!stop.signal.aborted && phase() === 'recording') {
      reporter.info(`\n${name}: stopping the recording; what was recorded will be post-processed (again to abort)`);
      stop.abort();
    } else if (!abort.signal.aborted) {
      reporter.warn(`${name}: aborting; the raw data already written is kept (again to end at once)`);
      abort.abort();
    } else exitNow(reporter, name);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return {
    stop: stop.signal,
    signal: abort.signal,
    release: () => {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/** Progress while recording: one redrawn line on a terminal, a plain line every 5 s otherwise. */
export function progressPrinter(reporter: Reporter, quiet: boolean) {
  let lastPlain = 0;
  let drawn = false;
  return {
    update(p: RecordingProgress) {
      if (quiet) return;
      const text =
        p.remainingMs > 0
          ? `recording: ${Math.floor(p.elapsedMs / 1000)} s elapsed, ${Math.ceil(p.remainingMs / 1000)} s left`
          : 'recording: done, perf is writing perf.data';
      if (reporter.interactive) {
        process.stderr.write(`\r${text}\x1b[K`);
        drawn = true;
      } else if (p.elapsedMs - lastPlain >= 5000) {
        lastPlain = p.elapsedMs;
        reporter.info(text);
      }
    },
    end() {
      if (drawn) process.stderr.write('\r\x1b[K');
      drawn = false;
    },
  };
}

/** Runs a collect session with the terminal's signals, progress and summary: shared by `collect` and `demo`. */
export async function runCollectSession(
  options: Partial<CollectOptions>,
  quiet: boolean,
  steps: readonly CollectStep[] = [],
): Promise<void> {
  const reporter = createReporter({ quiet });
  if (options.perfPath === undefined) {
    const perf = await choosePerf();
    // Worth saying only when there was a choice (a sidecar image with perfs built from kernel sources).
    if (perf.candidates > 1) reporter.info(perf.reason);
    options = { ...options, perfPath: perf.path };
  }
  let current: CollectPhase | undefined;
  const signals = trapSignals(reporter, () => current);
  const progress = progressPrinter(reporter, quiet);
  const say = (print: (m: string) => void) => (message: string) => {
    progress.end();
    print(message);
  };
  try {
    const sidecar = sidecarSettings(process.env, reporter);
    if (sidecar.owner) options = { ...options, owner: sidecar.owner };
    if (sidecar.launcherRun) options = { ...options, launcherRun: sidecar.launcherRun };
    const result = await collect(options, {
      ...(sidecar.showPath && { showPath: sidecar.showPath }),
      stop: signals.stop,
      signal: signals.signal,
      warn: say((m) => reporter.warn(m)),
      info: say((m) => reporter.info(m)),
      onPhase: (p) => {
        progress.end();
        current = p;
      },
      onRecordingProgress: (p) => progress.update(p),
      postprocess,
      steps,
      cwd: process.cwd(),
    });
    progress.end();
    process.stdout.write(`${formatSummary(result, process.cwd(), 8, sidecar.showPath).join('\n')}\n`);
  } finally {
    progress.end();
    signals.release();
  }
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, CollectArgs> = {
  builder: (yargs) => collectOptions(yargs) as unknown as Argv<CollectArgs>,
  handler: (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const servers = symbolServerList({ flags: args.symbolServer ?? [], env: process.env, offline: args.offline }, (m) =>
      reporter.warn(m),
    );
    const steps = chosenSteps({
      dotnet: { mode: args.perfmap },
      debugFiles: { mode: args.symbols, servers, env: process.env },
    });
    return runCollectSession(
      {
        ...(args.pid !== undefined && { pid: args.pid }),
        ...(args.name !== undefined && { name: args.name }),
        ...(args.output !== undefined && { output: args.output }),
        ...(args.event !== undefined && { event: args.event }),
        ...(args.perf !== undefined && { perfPath: args.perf }),
        durationSeconds: args.duration,
        frequency: args.frequency,
        unwind: args.unwind,
        stackBytes: args.stackSize === undefined ? collectDefaults.stackBytes : Math.ceil(args.stackSize / 8) * 8,
        offCpu: args.offCpu,
        ...(args.switchStackSize !== undefined && { switchStackBytes: Math.ceil(args.switchStackSize / 8) * 8 }),
        ...(args.switchShare !== undefined && { switchShare: parseSwitchShare(args.switchShare) }),
        ...(args.minBlock !== undefined && { minBlockUs: parseMinBlock(args.minBlock) }),
        snapshotMaxBytes: Math.round(args.snapshotLimit * (1 << 20)),
        targetTimeoutSeconds: args.targetTimeout,
        scope: args.scope,
        postprocess: args.postprocess,
      },
      args.quiet,
      steps,
    );
  },
};

export default command;

/** A check that failed: a usage error (exit 2), not an internal one. */
function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, {
    remedy: 'Give each option once, with a valid value; see --help.',
  });
}

/** --switch-share: `auto`, or a percentage from 1 to 100 as a share of 1. */
function parseSwitchShare(text: string): SwitchShareRequest {
  if (text === 'auto') return 'auto';
  const percent = Number(text);
  if (!(text.trim() !== '' && percent >= 1 && percent <= 100))
    throw usage('--switch-share must be auto or a percentage from 1 to 100');
  return percent / 100;
}

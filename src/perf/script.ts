// Runs `perf script` over a perf.data file and hands its text to a sink chunk by chunk, as perf writes it: nothing is
// buffered whole, and a slow sink slows perf down (the pipe fills) rather than memory growing. Gives the command run
// and the byte count; failures are PerfErrors (see exec.ts).
import { execa } from 'execa';
import { PerfError, startPerf, type PerfExecOptions } from './exec.js';
import { defaultPerfPath } from './perf-path.js';

/**
 * perf script looks a live target up by its PID: it enters the target's mount namespace and reads its perf map and
 * binaries there, as they are now (a map the target rewrote, a name megabytes long, a FIFO in a binary's place).
 * Run in a PID namespace of its own with a fresh /proc, perf sees no such process and reads what profcpu prepared
 * instead (the perf-map copy placed in /tmp with lines cut, the binaries the folder keeps), whether the
 * target still runs or not. --kill-child: perf dies with unshare when profcpu stops it.
 */
export const isolationWrapper = Object.freeze(['unshare', '--pid', '--fork', '--mount-proc', '--kill-child']);

/** The isolation wrapper when it works here (root, or a user namespace allowed), else undefined. */
export async function isolationAvailable(options: PerfExecOptions = {}): Promise<readonly string[] | undefined> {
  const [command, ...args] = isolationWrapper;
  try {
    await execa(command!, [...args, options.perfPath ?? defaultPerfPath, 'version'], {
      stdin: 'ignore',
      timeout: 10_000,
      cancelSignal: options.signal,
    });
    return isolationWrapper;
  } catch {
    return undefined;
  }
}

export interface PerfScriptOptions extends PerfExecOptions {
  /**
   * Arguments appended to `perf script -i FILE --header --no-inline` (e.g. `--pid 42`). Default none. Keep the
   * default fields: the `time` field is what FlameScope and speedscope need.
   */
  extraArgs?: readonly string[];
  /** Pass `-f`: read a perf.data owned by another user. Default false. */
  force?: boolean;
  /** The build-id cache perf reads instead of its own (`perf --buildid-dir`). */
  buildIdDir?: string;
}

/**
 * `--header` keeps the recording's machine and command line with the text; `--no-inline` skips addr2line's inline
 * resolution, which is slow and which profcpu does not use.
 */
export function perfScriptArgs(perfData: string, options: Pick<PerfScriptOptions, 'extraArgs' | 'force'> = {}) {
  return [
    'script',
    '-i',
    perfData,
    '--header',
    '--no-inline',
    ...(options.force ? ['-f'] : []),
    ...(options.extraArgs ?? []),
  ];
}

export interface PerfScriptRun {
  /** The argv run, perf's path first. */
  command: readonly string[];
  /** Bytes of text perf wrote. */
  bytes: number;
  /** The end of perf's stderr (warnings such as lost samples), trimmed. */
  stderrTail: string;
}

/** Receives each chunk of perf script's output, in order; may return a promise to hold perf back. */
export type ChunkSink = (chunk: Buffer) => void | Promise<void>;

/**
 * Runs perf script, feeding `sink` until perf exits. If the sink throws, perf is stopped and the sink's error is
 * rethrown; if perf fails or the signal aborts it, the PerfError is thrown.
 */
export async function perfScript(
  perfData: string,
  sink: ChunkSink,
  options: PerfScriptOptions = {},
): Promise<PerfScriptRun> {
  const cache = options.buildIdDir !== undefined ? ['--buildid-dir', options.buildIdDir] : [];
  const perf = startPerf([...cache, ...perfScriptArgs(perfData, options)], options);
  let bytes = 0;
  let sinkFailed = false;
  let sinkError: unknown;
  try {
    for await (const chunk of perf.stdout as AsyncIterable<Buffer>) {
      bytes += chunk.length;
      try {
        await sink(chunk);
      } catch (error) {
        [sinkFailed, sinkError] = [true, error];
        break;
      }
    }
  } catch (streamError) {
    // A broken pipe is a consequence; perf's own exit (e.g. aborted, crashed) says what happened.
    perf.kill();
    await perf.done.catch(explainFailure);
    throw streamError;
  }
  if (sinkFailed) {
    perf.kill();
    await perf.done.catch(() => undefined);
    throw sinkError;
  }
  const exit = await perf.done.catch(explainFailure);
  return { command: exit.command, bytes, stderrTail: exit.stderrTail };
}

/** What perf says when perf.data is cut short or not a perf.data at all (perf 6.1). */
const damagedPattern = /incompatible file format|failed to process type|file is empty|not a perf.data/i;

/** Rethrows perf's failure, with a remedy that fits when perf.data itself is the problem. */
function explainFailure(error: unknown): never {
  // perf mmaps perf.data and trusts its offsets: a truncated file kills it with SIGBUS or SIGSEGV.
  const crashed = error instanceof PerfError && (error.signal === 'SIGBUS' || error.signal === 'SIGSEGV');
  const damaged = error instanceof PerfError && (damagedPattern.test(error.stderrTail) || crashed);
  if (error instanceof PerfError && error.code === 'PERF_FAILED' && damaged) {
    throw new PerfError(
      'PERF_FAILED',
      error.message,
      { command: error.command, exitCode: error.exitCode, signal: error.signal, stderrTail: error.stderrTail },
      {
        remedy:
          'perf.data looks damaged or cut short (perf record killed before it finished, or an incomplete copy), or ' +
          'was written by a newer perf: record again and stop perf record with Ctrl-C or SIGINT, or run ' +
          'postprocess where a perf at least as new as the recording’s is installed.' +
          (crashed ? ' If the file is whole, perf itself crashed: try another perf version.' : ''),
        cause: error,
      },
    );
  }
  throw error;
}

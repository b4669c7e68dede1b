// Runs perf, and only perf: every perf invocation in profcpu goes through here, so a failure always reads the same
// way. Takes an argument array (never a shell string) and gives either the finished output (`runPerf`) or a
// streaming handle (`startPerf`); any failure becomes a PerfError that keeps the command, exit code, signal and the
// tail of perf's stderr, with a remedy.
import { execa, ExecaError } from 'execa';
import type { Readable, Writable } from 'node:stream';
import { ProfcpuError, type ErrorCode } from '../error.js';
import { defaultPerfPath } from './perf-path.js';

export interface PerfExecOptions {
  /** The perf executable, a path or a name looked up on PATH. Default `perf`. */
  perfPath?: string;
  /** Aborting kills perf (SIGTERM, then SIGKILL after 5 s) and fails with code ABORTED. */
  signal?: AbortSignal;
  /** perf's working directory. Default: the current one. */
  cwd?: string;
  /** Variables added to (or, when undefined, removed from) the inherited environment. */
  env?: Record<string, string | undefined>;
  /** A command perf is run under (`unshare ...`, see script.ts). Default none. */
  wrapper?: readonly string[];
  /** Give perf a pipe as its file descriptor 3, for commands (`perf record --control=fd:3`). Default false. */
  controlFd?: boolean;
}

/** How much of perf's stderr a PerfError keeps: the end is where perf says what went wrong. */
const stderrTailLimit = 4096;

export interface PerfErrorDetails {
  command: readonly string[];
  exitCode?: number | undefined;
  signal?: string | undefined;
  stderrTail?: string;
}

/** A perf run that could not start, was aborted, or exited with a failure. */
export class PerfError extends ProfcpuError {
  /** The argv run, perf's path first. */
  readonly command: readonly string[];
  readonly exitCode: number | undefined;
  readonly signal: string | undefined;
  /** The last few KB of perf's stderr, trimmed. */
  readonly stderrTail: string;

  constructor(
    code: ErrorCode,
    message: string,
    details: PerfErrorDetails,
    options: { remedy?: string; cause?: unknown } = {},
  ) {
    super(code, message, options);
    this.command = details.command;
    this.exitCode = details.exitCode;
    this.signal = details.signal;
    this.stderrTail = details.stderrTail ?? '';
  }
}

/** A command line as a user would type it, for messages and the manifest. */
export function formatCommand(command: readonly string[]): string {
  return command.map((arg) => (/^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replaceAll("'", `'\\''`)}'`)).join(' ');
}

export interface PerfRunResult {
  command: readonly string[];
  stdout: string;
  stderr: string;
}

/** Runs perf to completion and returns its output (for short commands: version, report --header-only...). */
export async function runPerf(args: readonly string[], options: PerfExecOptions = {}): Promise<PerfRunResult> {
  const command = [options.perfPath ?? defaultPerfPath, ...args];
  try {
    const result = await execa(command[0]!, command.slice(1), {
      ...spawnOptions(options),
      stdin: 'ignore',
      stripFinalNewline: false,
    });
    return { command, stdout: result.stdout, stderr: result.stderr };
  } catch (error) {
    throw toPerfError(error, command, error instanceof ExecaError ? String(error.stderr ?? '') : '', options.cwd);
  }
}

export interface PerfProcess {
  /** The argv run, perf's path first. */
  readonly command: readonly string[];
  readonly pid: number | undefined;
  /** perf's standard output, unbuffered: read it, or perf blocks once the pipe is full. */
  readonly stdout: Readable;
  /** perf's file descriptor 3, with PerfExecOptions.controlFd: commands for `--control=fd:3`. */
  readonly control: Writable | undefined;
  /** Resolves when perf exits with code 0; rejects with a PerfError otherwise. */
  readonly done: Promise<PerfExit>;
  /** Sends a signal to perf (default SIGTERM); false when it has already exited. */
  kill(signal?: NodeJS.Signals): boolean;
  /** The tail of what perf wrote to stderr so far. */
  stderrTail(): string;
  /**
   * Stops waiting for perf: its pipes closed, the process no longer keeping profcpu alive. For a perf that a kill
   * did not end (blocked in the kernel, e.g. reading a file on a FUSE mount that stopped answering).
   */
  abandon(): void;
}

export interface PerfExit {
  command: readonly string[];
  exitCode: number;
  stderrTail: string;
}

/** Starts perf with its stdout as a stream (perf script, perf record) and stdin closed. */
export function startPerf(args: readonly string[], options: PerfExecOptions = {}): PerfProcess {
  const command = [...(options.wrapper ?? []), options.perfPath ?? defaultPerfPath, ...args];
  const subprocess = execa(command[0]!, command.slice(1), {
    ...spawnOptions(options),
    stdio: options.controlFd ? ['ignore', 'pipe', 'pipe', 'pipe'] : ['ignore', 'pipe', 'pipe'],
    buffer: false,
  });
  const control = options.controlFd ? (subprocess.stdio[3] as Writable | undefined) : undefined;
  // Written to while perf runs; once perf is gone a write fails, which is no one's error.
  control?.on('error', () => {});
  let tail = '';
  subprocess.stderr.setEncoding('utf8');
  subprocess.stderr.on('data', (text: string) => {
    tail = (tail + text).slice(-stderrTailLimit);
  });
  const done = subprocess.then(
    (result) => ({ command, exitCode: result.exitCode ?? 0, stderrTail: tail.trim() }),
    (error: unknown) => {
      throw toPerfError(error, command, tail, options.cwd);
    },
  );
  // The caller may only look at `done` after draining stdout; an early failure must not go unhandled meanwhile.
  done.catch(() => {});
  return {
    command,
    pid: subprocess.pid,
    stdout: subprocess.stdout,
    control,
    done,
    // Under a wrapper (unshare --fork), SIGTERM reaches no one: unshare blocks it and perf is its namespace's init.
    // perf script has nothing to flush, so a wrapped perf is killed outright (--kill-child takes perf along).
    kill: (signal = 'SIGTERM') => subprocess.kill(options.wrapper ? 'SIGKILL' : signal),
    stderrTail: () => tail.trim(),
    abandon: () => {
      subprocess.stdout.destroy();
      subprocess.stderr.destroy();
      subprocess.unref();
    },
  };
}

function spawnOptions(options: PerfExecOptions) {
  return {
    cwd: options.cwd,
    env: options.env,
    extendEnv: true,
    cancelSignal: options.signal,
    // Aborting sends SIGTERM, then SIGKILL; a wrapped perf gets SIGKILL at once (see kill below).
    ...(options.wrapper && { killSignal: 'SIGKILL' as const }),
    forceKillAfterDelay: 5000,
  } as const;
}

/** Turns whatever execa threw into a PerfError with a remedy. */
export function toPerfError(error: unknown, command: readonly string[], stderr: string, cwd?: string): PerfError {
  const stderrTail = stderr.slice(-stderrTailLimit).trim();
  const where = cwd === undefined ? '' : ` (in ${cwd})`;
  if (!(error instanceof ExecaError)) {
    return new PerfError('PERF_FAILED', `${formatCommand(command)} failed: ${String(error)}`, {
      command,
      stderrTail,
    });
  }
  const details = { command, exitCode: error.exitCode, signal: error.signal, stderrTail };
  if (error.isCanceled) {
    return new PerfError('ABORTED', `${formatCommand(command)} was stopped: aborted`, details, { cause: error });
  }
  if (error.code === 'ENOENT' || error.code === 'EACCES') {
    const missing = error.code === 'ENOENT';
    return new PerfError(
      'NO_PERF',
      missing ? `perf was not found (${command[0]})` : `perf could not be run (${command[0]}: permission denied)`,
      details,
      {
        remedy:
          'Install perf: `apt-get install linux-perf` on Debian, `apt-get install linux-tools-$(uname -r)` on ' +
          'Ubuntu, `dnf install perf` on Fedora/RHEL; or put the perf binary on PATH.',
        cause: error,
      },
    );
  }
  const how = error.signal ? `was killed by ${error.signal}` : `failed with exit code ${error.exitCode ?? '?'}`;
  const lastLine = stderrTail.split('\n').at(-1)?.trim();
  const message = `${formatCommand(command)}${where} ${how}${lastLine ? `: ${lastLine}` : ''}`;
  return new PerfError('PERF_FAILED', message, details, {
    remedy: 'Run the command above by hand to see perf’s full output; `profcpu doctor` checks perf’s setup.',
    cause: error,
  });
}

// `perf record` of one process: options in, a running Recording out, which ends when `stop()` is called (the
// duration is over, Ctrl-C, SIGTERM) or when the target exits by itself; either way perf finalizes a valid
// perf.data and `done` resolves with how it ended and the sample count perf reported. The caller owns the clock, so
// it can take its last snapshot of the target just before stopping.
import { isProfcpuError } from '../error.js';
import type { Writable } from 'node:stream';
import { PerfError, startPerf, type PerfExecOptions } from './exec.js';
import type { RecordScope } from './record-scope.js';
import { versionAtLeast } from './version.js';

export interface RecordOptions {
  /** The process to record, as perf sees it. */
  pid: number;
  /** perf.data path (perf's `-o`). */
  output: string;
  /** Sampling frequency in Hz (`-F`). Default 99: off the beat of 100 Hz timers, ~1% overhead per core. */
  frequency?: number;
  /** Event (`-e`). Default `cpu-clock`, a software event every machine has (VMs often lack hardware `cycles`). */
  event?: string;
  /** The process itself (default), or every CPU filtered to a cgroup (see record-scope.ts). */
  scope?: RecordScope;
  /**
   * Build-ids in the mapping records (`--buildid-mmap`, perf and kernel 5.12 or later: see buildIdMmapWorks) instead
   * of a table perf writes when it exits: a recording cut short by a kill then still names its files.
   */
  buildIdMmap?: boolean;
  /**
   * No build-ids at all (`-B`, and no --buildid-mmap): perf then reads none of the target's files, for a target that
   * maps some from a file system whose server may never answer. Default false.
   */
  noBuildIds?: boolean;
  /**
   * How perf records call chains: `fp`, by frame pointer (-g); `dwarf`, the user registers and a copy of the top
   * `stackBytes` of the user stack in each sample (`--call-graph dwarf,N`: the kernel's frames by frame pointer, the
   * user stack unwound after, by the built-in engine or perf script). Default fp.
   */
  callGraph?: CallGraph;
  /**
   * perf compresses its records with zstd (`-z`; a perf built with zstd: `perf version --build-options`). Worth it
   * with DWARF call graphs: a sample's stack copy shrinks about 20 times (41.6 MB of a .NET fixture's 8 s wrote 1.8 MB).
   * Default false.
   */
  compress?: boolean;
  /**
   * Time perf may take to write its file once stopped, ms; then it is killed, and 2 s later given up (its file is
   * then unfinished: postprocess reads it to its last whole record). perf reads the target's mapped files then, and
   * a file on a FUSE mount that stopped answering blocks it for good. Default 120 s.
   */
  stopTimeoutMs?: number;
  /**
   * Record the target's time off the CPU too (`--off-cpu`): every switch of its threads off the CPU
   * (`sched:sched_switch`, with a frame-pointer call chain) and the kernel's switch records (`--switch-events`), which
   * say when each thread ran again (src/engine/offcpu/). Default false.
   */
  offCpu?: boolean;
  /** With offCpu and DWARF call graphs: the stack copied at each switch. Default switchStackBytes, or less. */
  switchStackBytes?: number;
  /**
   * With offCpu: the share of the time, above 0 and below 1, the switches' stacks are taken, in random windows (see
   * SwitchWindows); the switch records, which measure each stretch, are all taken. Default: all the time.
   */
  switchShare?: number;
}

/** The scheduler's tracepoint an off-CPU recording samples at every switch. */
export const switchTracepoint = 'sched:sched_switch';

export type CallGraph = { kind: 'fp' } | { kind: 'dwarf'; stackBytes: number };

export const recordDefaults = Object.freeze({ frequency: 99, event: 'cpu-clock' });

/**
 * The stack copy sizes perf takes: a multiple of 8 up to 65528 (perf's limit, from the sample record's 16-bit size;
 * perf rounds a size up to 8 itself).
 */
export const stackCopyLimits = Object.freeze({ min: 8, max: 65528 });

/**
 * perf record's arguments: call graphs by frame pointer (-g, or with DWARF unwinding's registers and stack copy), CLOCK_MONOTONIC (-k 1) as jitdump needs. `-D 1` makes
 * perf print "Events enabled" once it really records (after it has read the target's existing mappings, which takes
 * a while on a busy machine): the duration is counted from there. `-N`: perf would copy every sampled file, whole and
 * through the target's links, into its build-id cache; collect copies what naming needs itself, within limits
 * (src/binaries/kept-binaries.ts). `--no-buffering` writes each sample as it comes: perf killed with the target (its
 * PID namespace ending) leaves a file that holds every sample but the last few (src/perf/recover.ts finishes it).
 */
export function recordArgs(options: RecordOptions): string[] {
  const frequency = options.frequency ?? recordDefaults.frequency;
  const event = options.event ?? recordDefaults.event;
  const callGraph = options.callGraph ?? { kind: 'fp' };
  return [
    'record',
    '-N',
    // An off-CPU recording writes a record at every switch (tens of thousands a second): perf woken for each would
    // cost the target more than the switches themselves. Its buffers are written as they fill instead.
    ...(options.offCpu ? [] : ['--no-buffering']),
    ...(options.noBuildIds ? ['-B'] : options.buildIdMmap ? ['--buildid-mmap'] : []),
    '-D',
    '1',
    ...(options.offCpu
      ? [
          ...(options.compress ? ['-z'] : []),
          ...offCpuEvents(event, frequency, callGraph, options.scope?.kind === 'cgroup', options.switchStackBytes),
        ]
      : [
          '-F',
          String(frequency),
          ...callGraphArgs(callGraph),
          ...(options.compress ? ['-z'] : []),
          '-k',
          '1',
          '-e',
          event,
        ]),
    ...(switchWindowed(options) ? [`--control=fd:${controlFd}`] : []),
    // -G applies to the events given before it.
    ...(options.scope?.kind === 'cgroup' ? ['-a', '-G', options.scope.cgroup] : ['-p', String(options.pid)]),
    '-o',
    options.output,
  ];
}

/**
 * The stack copied at each switch off the CPU when unwinding is mixed (by default: `collect --switch-stack-size`):
 * .NET waits all go through glibc's futex wait, which keeps no frame pointer, so a frame-pointer chain stops there
 * (the kernel's ends at glibc's frame: seen on every futex wait of TodoApi, so it cannot take over where a copy ends);
 * from a copy, CFI steps through glibc and frame pointers through the runtime and .NET's code, as far as the copy
 * reaches. A loaded ASP.NET Core service switches 20 to 35 thousand times a second: copying 16 KiB at each cost perf a
 * fifth of a core (and the service the copies), 8 KiB half that. 8 KiB holds the .NET fixtures' waits and a plain
 * ASP.NET Core service's whole; TodoApi (EF Core, Identity) 91% of them, 97.7% with 16 KiB at 2.3 times perf's CPU.
 */
export const switchStackBytes = 8192;

/** The stack copied at each switch of a recording whose samples copy `stackBytes`: `requested`, else switchStackBytes or less. */
export function switchCopyBytes(stackBytes: number, requested: number | undefined): number {
  return requested ?? Math.min(stackBytes, switchStackBytes);
}

/**
 * The switches sampled: those of a thread that blocks (prev_state S or D), not of one preempted while runnable, which
 * the off-CPU profile leaves out (its SWITCH records still say so, at no stack's cost): a third of a loaded service's.
 */
export const blockedSwitchFilter = 'prev_state & 3';

/**
 * The events of an off-CPU recording. perf's -F and --call-graph would apply to the tracepoint too (sampling switches
 * at 99 Hz, and with DWARF call graphs dropping the user frames of frame-pointer chains), so the CPU event carries its
 * frequency and call graph as its own terms, named back to the event's name, and the tracepoint takes every switch
 * (its period of 1) a thread blocks at (blockedSwitchFilter) with its own call graph: a stack copy of
 * switchStackBytes at most when unwinding is mixed, else a frame-pointer chain (-g). Recording a cgroup, a dummy event first takes the tracking records and `--switch-events`'
 * records under the same -G: perf's own (added with no cgroup) would write every switch of every process on the
 * machine.
 */
function offCpuEvents(
  event: string,
  frequency: number,
  callGraph: CallGraph,
  cgroup: boolean,
  switchBytes: number | undefined,
): string[] {
  const dwarf = (bytes: number) => `call-graph=dwarf,stack-size=${bytes}`;
  const cpuTerms = [`freq=${frequency}`, ...(callGraph.kind === 'dwarf' ? [dwarf(callGraph.stackBytes)] : [])];
  const switchTerms =
    callGraph.kind === 'dwarf' ? `/${dwarf(switchCopyBytes(callGraph.stackBytes, switchBytes))}/` : '';
  return [
    '-g',
    '-k',
    '1',
    ...(cgroup ? ['-e', 'dummy'] : []),
    '-e',
    `${event}/${cpuTerms.join(',')},name=${event}/`,
    '-e',
    `${switchTracepoint}${switchTerms}`,
    '--filter',
    blockedSwitchFilter,
    '--switch-events',
  ];
}

function callGraphArgs(callGraph: CallGraph): string[] {
  return callGraph.kind === 'fp' ? ['-g'] : ['--call-graph', `dwarf,${callGraph.stackBytes}`];
}

/** `--buildid-mmap` needs perf 5.12 or later and a kernel that puts build-ids in mapping records (5.12 too). */
export function buildIdMmapWorks(perfVersion: string | undefined, kernelRelease: string): boolean {
  return perfVersion !== undefined && versionAtLeast(perfVersion, 5, 12) && versionAtLeast(kernelRelease, 5, 12);
}

export type RecordEnd = 'duration' | 'stopped' | 'target-exited';

export interface RecordOutcome {
  command: readonly string[];
  end: RecordEnd;
  /** Samples perf says it wrote, when it said so. */
  samples?: number;
  /** Size of the data written as perf reported it, in MB. */
  megabytes?: number;
  stderrTail: string;
  /** Set when perf was given up after its stop timeout (see RecordOptions.stopTimeoutMs): why. */
  abandoned?: string;
  /** With RecordOptions.switchShare: the windows the switches' stacks were taken in. */
  switchWindows?: SwitchWindowsFigures;
}

export interface Recording {
  readonly command: readonly string[];
  /** perf's PID (to watch its CPU use). */
  readonly pid: number | undefined;
  /**
   * Asks perf to finish now (SIGINT): it writes what it has and exits. The reason ends up in the outcome (perf
   * recording a cgroup does not end with the target: its watcher says `target-exited`).
   */
  stop(reason: RecordEnd): void;
  /** Resolves true once perf records, false if it exited before. */
  readonly started: Promise<boolean>;
  /** True once perf has exited. */
  readonly finished: boolean;
  readonly done: Promise<RecordOutcome>;
}

/**
 * Parses perf record's closing line: `[ perf record: Captured and wrote 0.024 MB perf.data (93 samples) ]`. The count
 * is absent when perf did not read its file back to collect build-ids (`--buildid-mmap`), or wrote no sample.
 */
export function parseRecordSummary(stderr: string): { samples?: number; megabytes?: number } {
  const match = /Captured and wrote ([\d.]+) MB .*?(?:\((\d+) samples\))? ]/.exec(stderr);
  if (!match) return {};
  return { megabytes: Number(match[1]), ...(match[2] !== undefined && { samples: Number(match[2]) }) };
}

/** Starts perf record; see RecordOptions. perf's own errors reject `done` with a PerfError. */
export function startRecord(options: RecordOptions, exec: Omit<PerfExecOptions, 'signal'> = {}): Recording {
  const windowed = switchWindowed(options);
  const perf = startPerf(recordArgs(options), { ...exec, controlFd: windowed });
  // perf record writes nothing useful to stdout; drain it so perf never blocks on a full pipe.
  perf.stdout.resume();
  let end: RecordEnd | undefined;
  let finished = false;
  let givenUp: ((outcome: RecordOutcome) => void) | undefined;
  // With switchShare: the windows the switch tracepoint is on in, once perf records.
  let windows: SwitchWindows | undefined;
  const abandoned = new Promise<RecordOutcome>((resolve) => (givenUp = resolve));
  const stop = (reason: RecordEnd) => {
    if (finished || end !== undefined) return;
    end = reason;
    windows?.stop();
    perf.kill('SIGINT');
    const timeoutMs = options.stopTimeoutMs ?? 120_000;
    setTimeout(() => {
      if (finished) return;
      perf.kill('SIGKILL');
      setTimeout(() => {
        if (finished) return;
        perf.abandon();
        const note = `perf did not end within ${timeoutMs / 1000} s of being stopped, nor once killed (blocked in the kernel): given up`;
        givenUp?.({ command: perf.command, end: reason, stderrTail: perf.stderrTail(), abandoned: note });
      }, 2000).unref();
    }, timeoutMs).unref();
  };
  const exited = perf.done.then(
    (exit): RecordOutcome => ({
      command: perf.command,
      end: end ?? 'target-exited',
      ...parseRecordSummary(exit.stderrTail),
      stderrTail: exit.stderrTail,
      ...(windows && { switchWindows: windows.end() }),
    }),
    (error: unknown): RecordOutcome => {
      // perf exits 130 after a SIGINT (143 after a SIGTERM) having written a valid perf.data: the one we sent, or
      // the terminal's Ctrl-C, which reaches perf directly as it shares profcpu's process group.
      if (isProfcpuError(error) && error instanceof PerfError && interrupted(error)) {
        return {
          command: perf.command,
          end: end ?? 'stopped',
          ...parseRecordSummary(error.stderrTail),
          stderrTail: error.stderrTail,
          ...(windows && { switchWindows: windows.end() }),
        };
      }
      windows?.end();
      throw error;
    },
  );
  const done = Promise.race([exited, abandoned]);
  void done
    .finally(() => {
      finished = true;
    })
    .catch(() => {});
  const started = new Promise<boolean>((resolve) => {
    const poll = setInterval(() => {
      if (enabledPattern.test(perf.stderrTail())) resolve(true);
      else if (finished) resolve(false);
      else return;
      clearInterval(poll);
    }, startPollMs);
  });
  if (windowed && perf.control) {
    const control = perf.control;
    void started.then((recording) => {
      if (recording && !finished && end === undefined) windows = new SwitchWindows(control, options.switchShare!);
    });
  }
  return {
    command: perf.command,
    pid: perf.pid,
    stop,
    started,
    get finished() {
      return finished;
    },
    done,
  };
}

const enabledPattern = /^Events enabled$/m;
/** How often perf's stderr is checked for "Events enabled": a small delay on a duration of seconds. */
const startPollMs = 25;

function interrupted(error: PerfError): boolean {
  return error.exitCode === 130 || error.exitCode === 143 || error.signal === 'SIGINT' || error.signal === 'SIGTERM';
}

/** perf's file descriptor the window commands go to (`--control=fd:3`: the first after stdin, stdout and stderr). */
const controlFd = 3;

function switchWindowed(options: RecordOptions): boolean {
  return options.offCpu === true && options.switchShare !== undefined && options.switchShare < 1;
}

/**
 * Window lengths, ms: each window the switches' stacks are taken lasts between these, at random. Each window is two
 * commands to perf (an ioctl per CPU each), a few to a few tens a second.
 */
const windowMs = { min: 20, max: 60 };

export interface SwitchWindowsFigures {
  /** The share of the time asked for. */
  share: number;
  /** The share of the recording's time the stacks were taken, as switched here. */
  measuredShare: number;
  windows: number;
}

/**
 * The windows of time an off-CPU recording takes the switches' stacks in (collect --switch-share): perf's switch
 * tracepoint disabled and enabled again through its control descriptor, each window 20 to 60 ms long and the gaps
 * between of a random length whose mean gives the share asked for. Random, so that which stretches get a stack does
 * not follow the program's rhythm (a fixed period, as perf's -c gives, aliases with periodic waits: a lock passed
 * back and forth between two threads came out at twice its time). The switch records (--switch-events), which
 * measure every stretch, stay on: the off-CPU fold weighs each thread's stacks to its whole time blocked.
 */
class SwitchWindows {
  private timer: NodeJS.Timeout | undefined;
  private readonly startedAt = performance.now();
  private enabledAt: number | undefined = performance.now();
  private enabledMs = 0;
  private windows = 0;
  private stopped = false;

  constructor(
    private readonly control: Writable,
    private readonly share: number,
  ) {
    // perf begins with every event on: the first window is the one perf starts with, cut short.
    this.disable();
  }

  /** No more switching; the tracepoint is left as it is. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Stops, and gives the figures. */
  end(): SwitchWindowsFigures {
    const now = performance.now();
    if (this.enabledAt !== undefined) this.enabledMs += now - this.enabledAt;
    this.enabledAt = undefined;
    this.stop();
    const total = now - this.startedAt;
    return { share: this.share, measuredShare: total > 0 ? this.enabledMs / total : 0, windows: this.windows };
  }

  private disable(): void {
    if (this.stopped) return;
    this.send('disable');
    if (this.enabledAt !== undefined) this.enabledMs += performance.now() - this.enabledAt;
    this.enabledAt = undefined;
    const meanGap = ((windowMs.min + windowMs.max) / 2) * ((1 - this.share) / this.share);
    this.later(() => this.enable(), Math.random() * 2 * meanGap);
  }

  private enable(): void {
    if (this.stopped) return;
    this.send('enable');
    this.enabledAt = performance.now();
    this.windows++;
    this.later(() => this.disable(), windowMs.min + Math.random() * (windowMs.max - windowMs.min));
  }

  private send(command: 'enable' | 'disable'): void {
    if (!this.control.destroyed) this.control.write(`${command} ${switchTracepoint}\n`);
  }

  private later(run: () => void, ms: number): void {
    this.timer = setTimeout(run, ms);
    this.timer.unref();
  }
}

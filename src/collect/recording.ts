// The recording phase of a collect session: perf record of the target for the duration, ended early by `stop`
// (first Ctrl-C) or `signal` (abort), or by the target exiting; meanwhile the target's perf map, jitdump and maps are
// snapshotted every snapshotIntervalMs and once more just before perf is stopped. Gives how it ended, the seconds
// actually sampled, and the CPU time profcpu and perf used meanwhile.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import { ProfcpuError } from '../error.js';
import { startRecord, type RecordEnd, type RecordOptions, type RecordOutcome, type Recording } from '../perf/record.js';
import type { RecordScope } from '../perf/record-scope.js';
import type { TargetInfo } from '../target/inspect.js';
import { clockTicksPerSecond, procPath, readStat } from '../target/procfs.js';
import type { TargetSnapshotter } from './snapshot.js';
import { OutputFolder } from '../files/output-folder.js';
import { countSamples, perfDataState } from '../perf/recover.js';
import { readPerfDataFile } from '../engine/perf-data/reader.js';
import type { CollectOptions } from './options.js';
import type { UnwindPlan } from './unwind-choice.js';

export interface RecordingProgress {
  elapsedMs: number;
  remainingMs: number;
}

export interface RecordTargetParams {
  options: CollectOptions;
  target: TargetInfo;
  dir: string;
  event: string;
  /** What perf watches: the process, or its cgroup (then the target's exit is watched here). */
  scope: RecordScope;
  /** Build-ids in mapping records (see RecordOptions). */
  buildIdMmap?: boolean;
  /** No build-ids at all (see RecordOptions). */
  noBuildIds?: boolean;
  /** How call chains are recorded (unwind-choice.ts). Default: by frame pointer. */
  unwind?: UnwindPlan;
  /** perf compresses its records (see RecordOptions). Default false. */
  compress?: boolean;
  /** With options.offCpu: the share of the time the switches' stacks are taken, below 1 (see RecordOptions). */
  switchShare?: number;
  snapshotter: Pick<TargetSnapshotter, 'refresh'>;
  /** Ends the recording early; the result is as complete as a full one. */
  stop?: AbortSignal;
  /** Ends it too; the caller then stops the session. */
  signal: AbortSignal;
  onProgress?: (progress: RecordingProgress) => void;
  /** Told why perf is started a second time (see restartOrThrow). */
  onRetry?: (message: string) => void;
  /** Told when perf is stopped for not starting to record within --target-timeout. */
  warn?: (message: string) => void;
}

/**
 * The last refresh before perf stops is waited for this long at most (5 s): the reader's pass may take
 * --target-timeout (120 s by default) when the target's files hang, and perf must stop when asked, not minutes later.
 * A refresh still running then is left to the reader's own deadline.
 */
const lastSnapshotTimeoutMs = 5_000;

export interface RecordedTarget {
  outcome: RecordOutcome;
  /** Seconds sampled: from perf enabling its events to the stop signal (or the target's exit). */
  seconds: number;
  /** CPU time used while recording, in ms: profcpu's own process, and perf's (last reading while it ran). */
  cpuMs: { profcpu: number; perf?: number };
}

export async function recordTarget(params: RecordTargetParams): Promise<RecordedTarget> {
  await params.snapshotter.refresh();
  const cpuBefore = process.cpuUsage();
  const run = new PerfRun(params);
  const unwatch = watchRecording(params, run);
  try {
    const outcome = await perfOutcome(params, run);
    // The last refresh, waited for once only.
    await (run.lastRefresh ?? within(run.snapshotting, lastSnapshotTimeoutMs));
    return await recorded(params, run, outcome, cpuBefore);
  } finally {
    run.end();
    unwatch();
  }
}

/** perf recording the target (started once more on a retry), and what the timers and listeners share about it. */
class PerfRun {
  recording: Recording;
  started = performance.now();
  ended = false;
  // Sampling ends when perf gets the signal; what follows is perf writing its file.
  stoppedAt: number | undefined;
  snapshotting: Promise<void> = Promise.resolve();
  lastRefresh: Promise<void> | undefined;
  perfCpuMs: number | undefined;
  private deadline: NodeJS.Timeout | undefined;
  private readonly params: RecordTargetParams;

  constructor(params: RecordTargetParams) {
    this.params = params;
    this.recording = this.begin();
  }

  /** Starts perf afresh, in place of the one that ended before it recorded anything. */
  restart(): void {
    this.recording = this.begin();
  }

  refresh(): Promise<void> {
    return (this.snapshotting = this.snapshotting.then(() => this.params.snapshotter.refresh()));
  }

  stopNow(reason: RecordEnd): void {
    this.stoppedAt ??= performance.now();
    this.recording.stop(reason);
  }

  // The last snapshot is taken just before perf stops, so it holds every method compiled during the recording.
  stopWith(reason: RecordEnd): void {
    void (this.lastRefresh ??= within(this.refresh(), lastSnapshotTimeoutMs)).then(() => this.stopNow(reason));
  }

  end(): void {
    this.ended = true;
    clearTimeout(this.deadline);
  }

  private begin(): Recording {
    const { options, warn } = this.params;
    const next = startRecord(recordOptions(this.params), { perfPath: options.perfPath });
    // perf reads the target's mappings before it records, and a read that never returns would hold it there for
    // good: past the target timeout it is stopped (then killed, then given up: see startRecord).
    const startLimitMs = options.targetTimeoutSeconds * 1000;
    const notStarted = setTimeout(() => {
      if (next !== this.recording || this.ended || this.stoppedAt !== undefined || next.finished) return;
      warn?.(
        `perf did not start recording within ${options.targetTimeoutSeconds} s (reading the target's mappings?): stopped`,
      );
      this.stopNow('stopped');
    }, startLimitMs);
    // The duration counts from when perf really records, not from when it was started.
    void next.started.then((ok) => {
      clearTimeout(notStarted);
      if (next !== this.recording) return;
      this.started = performance.now();
      if (ok && !this.ended)
        this.deadline = setTimeout(() => this.stopWith('duration'), options.durationSeconds * 1000);
    });
    return next;
  }
}

function recordOptions(params: RecordTargetParams): RecordOptions {
  const { options, target, dir, event, scope, buildIdMmap, noBuildIds, unwind, compress } = params;
  return {
    pid: target.pid,
    output: join(dir, layout.perfData),
    frequency: options.frequency,
    event,
    scope,
    buildIdMmap: buildIdMmap ?? false,
    noBuildIds: noBuildIds ?? false,
    callGraph: unwind?.kind === 'mixed' ? { kind: 'dwarf', stackBytes: unwind.stackBytes } : { kind: 'fp' },
    compress: compress ?? false,
    offCpu: options.offCpu,
    ...(options.switchStackBytes !== undefined && { switchStackBytes: options.switchStackBytes }),
    ...(params.switchShare !== undefined && params.switchShare < 1 && { switchShare: params.switchShare }),
    stopTimeoutMs: options.targetTimeoutSeconds * 1000,
  };
}

/**
 * Ends the recording on `stop` (after a last snapshot) or `signal` (at once); snapshots the target every
 * snapshotIntervalMs and ticks progress every progressIntervalMs. Gives what undoes all that.
 */
function watchRecording(params: RecordTargetParams, run: PerfRun): () => void {
  const { options, stop, signal } = params;
  const onStop = () => run.stopWith('stopped');
  const onAbort = () => run.stopNow('stopped');
  stop?.addEventListener('abort', onStop, { once: true });
  signal.addEventListener('abort', onAbort, { once: true });
  const snapshotTimer = setInterval(() => void run.refresh(), options.snapshotIntervalMs);
  const progressTimer = setInterval(() => progressTick(params, run), options.progressIntervalMs);
  if (stop?.aborted) onStop();
  return () => {
    clearInterval(snapshotTimer);
    clearInterval(progressTimer);
    stop?.removeEventListener('abort', onStop);
    signal.removeEventListener('abort', onAbort);
  };
}

function progressTick(params: RecordTargetParams, run: PerfRun): void {
  const { options, scope, onProgress } = params;
  const durationMs = options.durationSeconds * 1000;
  const elapsedMs = performance.now() - run.started;
  if (!run.recording.finished) onProgress?.({ elapsedMs, remainingMs: Math.max(0, durationMs - elapsedMs) });
  // perf watching a cgroup goes on after the target exits: end the recording as perf -p would.
  if (scope.kind === 'cgroup') stopIfTargetGone(params, run);
  if (run.recording.pid !== undefined) readPerfCpu(params, run, run.recording.pid);
}

function stopIfTargetGone(params: RecordTargetParams, run: PerfRun): void {
  const { options, target } = params;
  void readStat(target.pid, { procRoot: options.procRoot }).then((now) => {
    // A pid reused by another process (another start time) counts as gone too.
    const gone = now === undefined || now.state === 'Z' || now.state === 'X' || now.startTicks !== target.startTicks;
    if (gone && !run.recording.finished) run.stopNow('target-exited');
  });
}

// perf's own CPU time is read while it runs (its exit status carries none); the last reading is kept.
function readPerfCpu(params: RecordTargetParams, run: PerfRun, perfPid: number): void {
  void readStat(perfPid, { procRoot: params.options.procRoot })
    .then((perfStat) => {
      if (perfStat) run.perfCpuMs = ((perfStat.utimeTicks + perfStat.stimeTicks) * 1000) / clockTicksPerSecond;
    })
    .catch(() => {});
}

/** How perf ended, perf started once more if the first one ended before it recorded anything. */
async function perfOutcome(params: RecordTargetParams, run: PerfRun): Promise<RecordOutcome> {
  let outcome: RecordOutcome | undefined;
  for (let attempt = 1; outcome === undefined; attempt++) {
    outcome = await run.recording.done.catch((error: unknown) => restartOrThrow(params, run, error, attempt));
  }
  return outcome;
}

/** After perf failed: the error to report, thrown, or perf started once more (then undefined). */
async function restartOrThrow(
  params: RecordTargetParams,
  run: PerfRun,
  error: unknown,
  attempt: number,
): Promise<undefined> {
  const { options, target, dir, signal } = params;
  // perf cannot attach to a process that is gone: say that, rather than perf's generic complaint.
  if (
    !(await stat(procPath(target.pid, 'stat', { procRoot: options.procRoot })).then(
      () => true,
      () => false,
    ))
  )
    throw new ProfcpuError('NO_TARGET', `process ${target.pid} exited before perf could record it`, {
      remedy: 'Profile a process that keeps running for the duration, or start recording sooner.',
      cause: error,
    });
  // perf 7.3 was seen to end while attaching (exit 255, nothing said, a few mapping records written) to a .NET
  // process whose threads come and go: a perf that never enabled its events is started once more, afresh.
  if (attempt > 1 || (await run.recording.started) || run.stoppedAt !== undefined || signal.aborted) throw error;
  params.onRetry?.(
    `perf record ended before it recorded anything (${error instanceof Error ? error.message : String(error)}); starting it once more`,
  );
  await removePerfData(dir);
  run.restart();
  return undefined;
}

async function recorded(
  params: RecordTargetParams,
  run: PerfRun,
  outcome: RecordOutcome,
  cpuBefore: NodeJS.CpuUsage,
): Promise<RecordedTarget> {
  const cpu = process.cpuUsage(cpuBefore);
  // perf leaves the count out when build-ids come with the mappings: count the records it wrote.
  const samples = outcome.samples ?? (await samplesIn(params.dir, params.signal));
  return {
    outcome: { ...outcome, ...(samples !== undefined && { samples }) },
    seconds: ((run.stoppedAt ?? performance.now()) - run.started) / 1000,
    cpuMs: {
      profcpu: Math.round((cpu.user + cpu.system) / 1000),
      ...(run.perfCpuMs !== undefined && { perf: run.perfCpuMs }),
    },
  };
}

/** Waits for `work` (never rejected: a refresh warns of its own failures), `ms` at most. */
async function within(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** What a perf that failed to start left, so the next one writes afresh (perf renames a file in its way). */
async function removePerfData(dir: string): Promise<void> {
  const folder = await OutputFolder.open(dir);
  try {
    await folder.remove(layout.perfData);
  } finally {
    await folder.close();
  }
}

async function samplesIn(dir: string, signal: AbortSignal): Promise<number | undefined> {
  const folder = await OutputFolder.open(dir);
  try {
    const counted = await countSamples(folder, layout.perfData, signal);
    if (counted !== undefined || (await perfDataState(folder, layout.perfData)) !== 'finished') return counted;
    // perf record -z: the samples are inside compressed records, which the built-in reader decompresses.
    return (await readPerfDataFile(join(dir, layout.perfData), { event: () => {} }, { signal })).samples;
  } catch {
    return undefined;
  } finally {
    await folder.close();
  }
}

// One `profcpu collect` run: options in, a CollectResult out (the output folder, what was recorded, the postprocess
// result, phase timings). Phases: choose target → preflight → steps before recording → record (snapshotting the
// target's perf map, jitdump and maps meanwhile) → steps after recording → postprocess. Two signals drive it:
// `stop` ends the recording early and still post-processes (first Ctrl-C), `signal` aborts (second Ctrl-C) and leaves
// the raw data in place.
import { mkdir, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { layout } from '../bundle/layout.js';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { defaultEvent, gatherFacts, judgeFacts, type Check } from '../perf/preflight.js';
import { startRecord, type RecordOutcome } from '../perf/record.js';
import { chooseTarget } from '../target/discover.js';
import type { TargetInfo } from '../target/inspect.js';
import { clockTicksPerSecond, procPath, readStat } from '../target/procfs.js';
import { TargetSnapshotter, type SnapshotReport } from '../target/snapshot.js';
import { collectDefaults, defaultOutputDir, type CollectOptions } from './options.js';
import type { CollectStep, StepContext, StepReport } from './steps.js';

/** The postprocess stage as collect calls it (src/postprocess/postprocess.ts), injected to keep this file testable. */
export type PostprocessRun<R> = (
  dir: string,
  options: undefined,
  context: {
    signal?: AbortSignal;
    warn?: Warn;
    progress?: (m: string) => void;
    manifestExtra?: Record<string, unknown>;
  },
) => Promise<R>;

export type CollectPhase =
  'target' | 'preflight' | 'before-recording' | 'recording' | 'after-recording' | 'postprocess';

export interface RecordingProgress {
  elapsedMs: number;
  remainingMs: number;
  /** Size of perf.data so far (perf writes it in bursts). */
  perfDataBytes: number;
}

export interface CollectContext<R> {
  /** Aborting ends the recording early; what was recorded is still post-processed. */
  stop?: AbortSignal;
  /** Aborting stops everything (ABORTED); raw data already written stays. */
  signal?: AbortSignal;
  warn?: Warn;
  /** Status lines: which target, which phase. */
  info?: (message: string) => void;
  /** Called every progressIntervalMs while recording. */
  onRecordingProgress?: (progress: RecordingProgress) => void;
  onPhase?: (phase: CollectPhase) => void;
  /** Runs when `options.postprocess` is true. */
  postprocess?: PostprocessRun<R>;
  steps?: readonly CollectStep[];
  /** Time source, for the default output folder name. */
  now?: () => Date;
  /** Working directory for the default output folder. */
  cwd?: string;
}

export interface CollectResult<R> {
  dir: string;
  target: TargetInfo;
  /** Why that target was chosen. */
  reason: string;
  event: string;
  checks: Check[];
  record: RecordOutcome;
  /** Seconds actually recorded. */
  recordedSeconds: number;
  snapshots: SnapshotReport;
  steps: Record<string, StepReport>;
  /** Wall time of each phase in ms. */
  phaseMs: Partial<Record<CollectPhase, number>>;
  /** CPU time used while recording, in ms: profcpu's own process, and perf's. */
  cpuMs: { profcpu: number; perf?: number };
  /** Absent with --no-postprocess. */
  postprocess?: R;
}

export async function collect<R>(
  partial: Partial<CollectOptions>,
  context: CollectContext<R> = {},
): Promise<CollectResult<R>> {
  const options: CollectOptions = { ...collectDefaults, ...partial };
  const signal = context.signal ?? new AbortController().signal;
  const warn = context.warn ?? ignoreWarnings;
  const info = context.info ?? (() => {});
  const procfs = { procRoot: options.procRoot };
  const phaseMs: CollectResult<R>['phaseMs'] = {};
  const phase = async <T>(name: CollectPhase, run: () => Promise<T>): Promise<T> => {
    throwIfAborted(signal);
    context.onPhase?.(name);
    const started = performance.now();
    try {
      return await run();
    } finally {
      phaseMs[name] = Math.round(performance.now() - started);
    }
  };

  const { target, reason } = await phase('target', () =>
    chooseTarget(
      {
        ...(options.pid !== undefined && { pid: options.pid }),
        ...(options.name !== undefined && { name: options.name }),
      },
      procfs,
    ),
  );
  info(`profiling process ${target.pid} (${target.cmdline.join(' ').slice(0, 100)}): ${reason}`);
  const dir = resolve(options.output ?? defaultOutputDir(context.cwd ?? '.', (context.now ?? (() => new Date()))()));

  info(`output folder: ${dir}`);
  const { checks, event } = await phase('preflight', async () => {
    const facts = await gatherFacts({ ...procfs, perfPath: options.perfPath, pid: target.pid, outputDir: dir, signal });
    return { checks: judgeFacts(facts), event: options.event ?? defaultEvent(facts) };
  });
  for (const check of checks.filter((c) => c.status === 'warn'))
    warn(`${check.message}${check.remedy ? ` (fix: ${check.remedy})` : ''}`);
  const fatal = checks.find((c) => c.status === 'fatal');
  if (fatal)
    throw new ProfcpuError('PREFLIGHT_FAILED', `cannot record: ${fatal.message}`, {
      remedy: fatal.remedy ?? 'Run `profcpu doctor` for details.',
    });

  await mkdir(join(dir, layout.targetDir), { recursive: true });
  const stepContext: StepContext = { target, dir, signal, warn, progress: info };
  const steps: Record<string, StepReport> = {};
  await phase('before-recording', () => runSteps(context.steps ?? [], 'beforeRecording', stepContext, steps));

  // Written before recording, so an interrupted session still leaves a folder postprocess can finish.
  await writeFile(join(dir, layout.targetInfo), `${JSON.stringify(targetJson(target, reason), null, 2)}\n`);
  const snapshotter = new TargetSnapshotter(dir, target, procfs);
  info(`recording for ${options.durationSeconds} s at ${options.frequency} Hz (${event}); Ctrl-C stops early`);
  const recorded = await phase('recording', () => record(options, target, dir, event, snapshotter, context, signal));
  info(
    `recorded ${recorded.outcome.samples ?? 'an unknown number of'} samples in ${recorded.seconds.toFixed(1)} s (${describeEnd(recorded.outcome)})`,
  );

  await phase('after-recording', () => runSteps(context.steps ?? [], 'afterRecording', stepContext, steps));
  const result: CollectResult<R> = {
    dir,
    target,
    reason,
    event,
    checks,
    record: recorded.outcome,
    recordedSeconds: recorded.seconds,
    snapshots: snapshotter.report(),
    steps,
    phaseMs,
    cpuMs: recorded.cpuMs,
  };
  if (options.postprocess && context.postprocess) {
    const run = context.postprocess;
    result.postprocess = await phase('postprocess', () =>
      run(dir, undefined, { signal, warn, progress: info, manifestExtra: { collect: manifestEntry(result, options) } }),
    );
  }
  return result;
}

async function record<R>(
  options: CollectOptions,
  target: TargetInfo,
  dir: string,
  event: string,
  snapshotter: TargetSnapshotter,
  context: CollectContext<R>,
  signal: AbortSignal,
): Promise<{ outcome: RecordOutcome; seconds: number; cpuMs: CollectResult<R>['cpuMs'] }> {
  const durationMs = options.durationSeconds * 1000;
  await snapshotter.refresh();
  const cpuBefore = process.cpuUsage();
  let started = performance.now();
  const recording = startRecord(
    { pid: target.pid, output: join(dir, layout.perfData), frequency: options.frequency, event },
    { perfPath: options.perfPath },
  );
  let perfCpuMs: number | undefined;
  let snapshotting: Promise<void> = Promise.resolve();
  const refresh = () => (snapshotting = snapshotting.then(() => snapshotter.refresh()));
  // The last snapshot is taken just before perf stops, so it holds every method compiled during the recording.
  const stopWith = (reason: 'duration' | 'stopped') => void refresh().then(() => recording.stop(reason));
  const onStop = () => stopWith('stopped');
  const onAbort = () => recording.stop('stopped');
  context.stop?.addEventListener('abort', onStop, { once: true });
  signal.addEventListener('abort', onAbort, { once: true });
  let deadline: NodeJS.Timeout | undefined;
  let ended = false;
  // The duration counts from when perf really records, not from when it was started.
  void recording.started.then((ok) => {
    started = performance.now();
    if (ok && !ended) deadline = setTimeout(() => stopWith('duration'), durationMs);
  });
  const snapshotTimer = setInterval(() => void refresh(), options.snapshotIntervalMs);
  const progressTimer = setInterval(() => {
    const elapsedMs = performance.now() - started;
    void Promise.all([
      stat(join(dir, layout.perfData)).then(
        (s) => s.size,
        () => 0,
      ),
      recording.pid === undefined
        ? undefined
        : readStat(recording.pid, { procRoot: options.procRoot }).catch(() => undefined),
    ]).then(([bytes, perfStat]) => {
      if (perfStat) perfCpuMs = ((perfStat.utimeTicks + perfStat.stimeTicks) * 1000) / clockTicksPerSecond;
      if (!recording.finished)
        context.onRecordingProgress?.({
          elapsedMs,
          remainingMs: Math.max(0, durationMs - elapsedMs),
          perfDataBytes: bytes,
        });
    });
  }, options.progressIntervalMs);
  if (context.stop?.aborted) onStop();
  try {
    const outcome = await recording.done.catch(async (error: unknown) => {
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
      throw error;
    });
    await snapshotting;
    throwIfAborted(signal);
    const cpu = process.cpuUsage(cpuBefore);
    return {
      outcome,
      seconds: (performance.now() - started) / 1000,
      cpuMs: {
        profcpu: Math.round((cpu.user + cpu.system) / 1000),
        ...(perfCpuMs !== undefined && { perf: perfCpuMs }),
      },
    };
  } finally {
    ended = true;
    clearTimeout(deadline);
    clearInterval(snapshotTimer);
    clearInterval(progressTimer);
    context.stop?.removeEventListener('abort', onStop);
    signal.removeEventListener('abort', onAbort);
  }
}

async function runSteps(
  steps: readonly CollectStep[],
  when: 'beforeRecording' | 'afterRecording',
  context: StepContext,
  reports: Record<string, StepReport>,
): Promise<void> {
  for (const step of steps) {
    const run = step[when];
    if (!run) continue;
    try {
      const report = await run.call(step, context);
      if (report) reports[step.name] = { ...reports[step.name], ...report };
    } catch (error) {
      if (isProfcpuError(error, 'ABORTED')) throw error;
      const message = error instanceof Error ? error.message : String(error);
      context.warn(`${step.name}: ${message}${isProfcpuError(error) && error.remedy ? ` (fix: ${error.remedy})` : ''}`);
      reports[step.name] = { ...reports[step.name], [`${when}Error`]: message };
    }
  }
}

function describeEnd(outcome: RecordOutcome): string {
  return outcome.end === 'duration'
    ? 'full duration'
    : outcome.end === 'stopped'
      ? 'stopped early'
      : 'the target exited';
}

/** target/target.json: what postprocess and a later reader need; never the environment (it may hold secrets). */
function targetJson(target: TargetInfo, reason: string): Record<string, unknown> {
  const { pid, nspid, comm, cmdline, uid, runtime, dotnet, startTicks, perfMap, jitDump } = target;
  return {
    pid,
    nspid,
    comm,
    cmdline,
    uid,
    runtime,
    ...(dotnet && { dotnet }),
    startTicks,
    perfMap: { path: perfMap.path, present: perfMap.present },
    jitDump: { path: jitDump.path, present: jitDump.present },
    chosenBecause: reason,
  };
}

function manifestEntry<R>(result: CollectResult<R>, options: CollectOptions): Record<string, unknown> {
  return {
    target: {
      pid: result.target.pid,
      nspid: result.target.nspid,
      comm: result.target.comm,
      runtime: result.target.runtime,
    },
    chosenBecause: result.reason,
    options: { durationSeconds: options.durationSeconds, frequency: options.frequency, event: result.event },
    record: {
      command: result.record.command,
      end: result.record.end,
      samples: result.record.samples,
      seconds: Number(result.recordedSeconds.toFixed(3)),
    },
    preflight: result.checks,
    snapshots: result.snapshots,
    steps: result.steps,
    phaseMs: result.phaseMs,
    cpuMs: result.cpuMs,
  };
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted)
    throw new ProfcpuError('ABORTED', 'collect was aborted; the raw data written so far is kept', {
      remedy: 'Run `profcpu postprocess --dir <output folder>` to finish a folder whose recording completed.',
    });
}

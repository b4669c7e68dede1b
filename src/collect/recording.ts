// The recording phase of a collect session: perf record of the target for the duration, ended early by `stop`
// (first Ctrl-C) or `signal` (abort), or by the target exiting; meanwhile the target's perf map, jitdump and maps are
// snapshotted every snapshotIntervalMs and once more just before perf is stopped. Gives how it ended, the seconds
// actually sampled, and the CPU time profcpu and perf used meanwhile.
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import { ProfcpuError } from '../error.js';
import { startRecord, type RecordEnd, type RecordOutcome } from '../perf/record.js';
import type { RecordScope } from '../perf/record-scope.js';
import type { TargetInfo } from '../target/inspect.js';
import { clockTicksPerSecond, procPath, readStat } from '../target/procfs.js';
import type { TargetSnapshotter } from './snapshot.js';
import { OutputFolder } from '../files/output-folder.js';
import { countSamples } from '../perf/recover.js';
import type { CollectOptions } from './options.js';

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
  snapshotter: Pick<TargetSnapshotter, 'refresh'>;
  /** Ends the recording early; the result is as complete as a full one. */
  stop?: AbortSignal;
  /** Ends it too; the caller then stops the session. */
  signal: AbortSignal;
  onProgress?: (progress: RecordingProgress) => void;
  /** Told why perf is started a second time (see recordTarget). */
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
  const { options, target, dir, event, scope, buildIdMmap, noBuildIds, snapshotter, stop, signal, onProgress } = params;
  const durationMs = options.durationSeconds * 1000;
  await snapshotter.refresh();
  const cpuBefore = process.cpuUsage();
  let started = performance.now();
  let deadline: NodeJS.Timeout | undefined;
  let ended = false;
  const begin = () => {
    const next = startRecord(
      {
        pid: target.pid,
        output: join(dir, layout.perfData),
        frequency: options.frequency,
        event,
        scope,
        buildIdMmap: buildIdMmap ?? false,
        noBuildIds: noBuildIds ?? false,
        stopTimeoutMs: options.targetTimeoutSeconds * 1000,
      },
      { perfPath: options.perfPath },
    );
    // perf reads the target's mappings before it records, and a read that never returns would hold it there for
    // good: past the target timeout it is stopped (then killed, then given up: see startRecord).
    const startLimitMs = options.targetTimeoutSeconds * 1000;
    const notStarted = setTimeout(() => {
      if (next !== recording || ended || stoppedAt !== undefined || next.finished) return;
      params.warn?.(
        `perf did not start recording within ${options.targetTimeoutSeconds} s (reading the target's mappings?): stopped`,
      );
      stopNow('stopped');
    }, startLimitMs);
    // The duration counts from when perf really records, not from when it was started.
    void next.started.then((ok) => {
      clearTimeout(notStarted);
      if (next !== recording) return;
      started = performance.now();
      if (ok && !ended) deadline = setTimeout(() => stopWith('duration'), durationMs);
    });
    return next;
  };
  let recording = begin();
  let perfCpuMs: number | undefined;
  let snapshotting: Promise<void> = Promise.resolve();
  const refresh = () => (snapshotting = snapshotting.then(() => snapshotter.refresh()));
  // The last snapshot is taken just before perf stops, so it holds every method compiled during the recording.
  // Sampling ends when perf gets the signal; what follows is perf writing its file.
  let stoppedAt: number | undefined;
  const stopNow = (reason: RecordEnd) => {
    stoppedAt ??= performance.now();
    recording.stop(reason);
  };
  let lastRefresh: Promise<void> | undefined;
  const stopWith = (reason: RecordEnd) =>
    void (lastRefresh ??= within(refresh(), lastSnapshotTimeoutMs)).then(() => stopNow(reason));
  const onStop = () => stopWith('stopped');
  const onAbort = () => stopNow('stopped');
  stop?.addEventListener('abort', onStop, { once: true });
  signal.addEventListener('abort', onAbort, { once: true });
  const snapshotTimer = setInterval(() => void refresh(), options.snapshotIntervalMs);
  // perf's own CPU time is read while it runs (its exit status carries none); the last reading is kept.
  const progressTimer = setInterval(() => {
    const elapsedMs = performance.now() - started;
    if (!recording.finished) onProgress?.({ elapsedMs, remainingMs: Math.max(0, durationMs - elapsedMs) });
    // perf watching a cgroup goes on after the target exits: end the recording as perf -p would.
    if (scope.kind === 'cgroup')
      void readStat(target.pid, { procRoot: options.procRoot }).then((now) => {
        // A pid reused by another process (another start time) counts as gone too.
        const gone =
          now === undefined || now.state === 'Z' || now.state === 'X' || now.startTicks !== target.startTicks;
        if (gone && !recording.finished) stopNow('target-exited');
      });
    if (recording.pid !== undefined)
      void readStat(recording.pid, { procRoot: options.procRoot })
        .then((perfStat) => {
          if (perfStat) perfCpuMs = ((perfStat.utimeTicks + perfStat.stimeTicks) * 1000) / clockTicksPerSecond;
        })
        .catch(() => {});
  }, options.progressIntervalMs);
  if (stop?.aborted) onStop();
  try {
    let outcome: RecordOutcome | undefined;
    for (let attempt = 1; outcome === undefined; attempt++) {
      outcome = await recording.done.catch(async (error: unknown) => {
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
        if (attempt > 1 || (await recording.started) || stoppedAt !== undefined || signal.aborted) throw error;
        params.onRetry?.(
          `perf record ended before it recorded anything (${error instanceof Error ? error.message : String(error)}); starting it once more`,
        );
        await removePerfData(dir);
        recording = begin();
        return undefined;
      });
    }
    // The last refresh, waited for once only.
    await (lastRefresh ?? within(snapshotting, lastSnapshotTimeoutMs));
    const cpu = process.cpuUsage(cpuBefore);
    // perf leaves the count out when build-ids come with the mappings: count the records it wrote.
    const samples = outcome.samples ?? (await samplesIn(dir, signal));
    return {
      outcome: { ...outcome, ...(samples !== undefined && { samples }) },
      seconds: ((stoppedAt ?? performance.now()) - started) / 1000,
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
    stop?.removeEventListener('abort', onStop);
    signal.removeEventListener('abort', onAbort);
  }
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
    return await countSamples(folder, layout.perfData, signal);
  } catch {
    return undefined;
  } finally {
    await folder.close();
  }
}

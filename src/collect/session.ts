// One `profcpu collect` run: options in, a CollectResult out (the output folder, what was recorded, the postprocess
// result, phase timings). Phases: choose target → preflight → steps before recording → record (snapshotting the
// target's perf map, jitdump and maps meanwhile) → steps after recording → postprocess. Two signals drive it:
// `stop` ends the recording early and still post-processes (first Ctrl-C), `signal` aborts (second Ctrl-C) and leaves
// the raw data in place.
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { layout } from '../output/layout.js';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import { defaultEvent, gatherFacts, judgeFacts, type Check } from '../perf/preflight.js';
import { buildIdMmapWorks, switchCopyBytes, type RecordOutcome } from '../perf/record.js';
import { chooseScope, type RecordScope, type ScopeChoice } from '../perf/record-scope.js';
import { chooseTarget } from '../target/discover.js';
import type { TargetInfo } from '../target/inspect.js';
import { missedSnapshots, type SnapshotReport } from './snapshot.js';
import type { StallingMapping } from '../target/mounts.js';
import { kernelSteps, targetReaderSteps } from './registry.js';
import { readerStep, ReaderStoppedError, TargetReader } from './target-reader.js';
import { collectDefaults, defaultOutputDir, type CollectOptions } from './options.js';
import { chooseUnwind, type UnwindPlan } from './unwind-choice.js';
import { recordTarget, type RecordedTarget, type RecordingProgress } from './recording.js';
import { onceSampledFiles, type CollectStep, type StepContext, type StepReport } from '../step/step.js';
import { blockingSwitchRate, chooseSwitchShare } from './switch-share.js';

export type { RecordingProgress } from './recording.js';

/** The postprocess stage as collect calls it (src/postprocess/postprocess.ts), injected to keep this file testable. */
export type PostprocessRun<R> = (
  dir: string,
  options: { perfPath: string; offCpu?: { minBlockUs: number; preempted: boolean } },
  context: {
    signal?: AbortSignal;
    warn?: Warn;
    progress?: (m: string) => void;
    manifestExtra?: Record<string, unknown>;
  },
) => Promise<R>;

export type CollectPhase =
  'target' | 'preflight' | 'before-recording' | 'recording' | 'after-recording' | 'postprocess';

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
  /** How a path of the output folder is shown (the host's path when profcpu runs in a sidecar). Default: as is. */
  showPath?: (path: string) => string;
}

export interface CollectResult<R> {
  dir: string;
  target: TargetInfo;
  /** Why that target was chosen. */
  reason: string;
  event: string;
  /** What perf watched, and why. */
  scope: ScopeChoice;
  /** How call chains were recorded, and why. */
  unwind: UnwindPlan;
  checks: Check[];
  record: RecordOutcome;
  /** Seconds actually recorded. */
  recordedSeconds: number;
  snapshots: SnapshotReport;
  steps: Record<string, StepReport>;
  /** Wall time of each phase in ms. */
  phaseMs: Partial<Record<CollectPhase, number>>;
  /** CPU time used while recording, in ms: profcpu's own process, and perf's. */
  cpuMs: RecordedTarget['cpuMs'];
  /** Absent with --no-postprocess. */
  postprocess?: R;
}

/** What collect runs with, once the options are merged: the parts every phase below needs. */
interface Session<R> {
  options: CollectOptions;
  context: CollectContext<R>;
  signal: AbortSignal;
  warn: Warn;
  info: (message: string) => void;
  procfs: { procRoot: string };
}

/** What preflight decided: the checks, and how perf records. */
interface RecordPlan {
  checks: Check[];
  event: string;
  scope: ScopeChoice;
  buildIdMmap: boolean;
  /** perf writes no build-ids, so reads none of the target's files (see avoidStallingFiles). */
  noBuildIds: boolean;
  /** How call chains are recorded, and why. */
  unwind: UnwindPlan;
  /** perf can compress its records (zstd). */
  perfCompresses: boolean;
}

export async function collect<R>(
  partial: Partial<CollectOptions>,
  context: CollectContext<R> = {},
): Promise<CollectResult<R>> {
  const options: CollectOptions = { ...collectDefaults, ...partial };
  const signal = context.signal ?? new AbortController().signal;
  const session: Session<R> = {
    options,
    context,
    signal,
    warn: context.warn ?? ignoreWarnings,
    info: context.info ?? (() => {}),
    procfs: { procRoot: options.procRoot },
  };
  const { info, warn } = session;
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

  const { target, reason } = await phase('target', () => chooseTarget(targetQuery(options), session.procfs));
  info(`profiling process ${target.pid} (${target.cmdline.join(' ').slice(0, 100)}): ${reason}`);
  const dir = resolve(options.output ?? defaultOutputDir(context.cwd ?? '.', (context.now ?? (() => new Date()))()));
  info(`output folder: ${context.showPath?.(dir) ?? dir}`);
  const plan = await phase('preflight', () => preflight(session, target, dir));

  // The target's files first: when they cannot be opened, no folder is left behind (root's, and empty). They are
  // read in a child process only (src/collect/target-reader.ts), which a read that never returns cannot outlive.
  const reader = await startReader(session, target, dir, plan.unwind);
  try {
    const folder = await OutputFolder.open(dir, { create: true });
    try {
      return await recordAndFinish(session, phase, phaseMs, folder, reader, { target, reason, dir }, plan);
    } finally {
      // Given to the user who asked, whatever happened: a folder they cannot read or delete helps nobody.
      if (options.owner)
        await folder
          .chownTree(options.owner)
          .catch((error: unknown) => warn(`cannot give ${dir} to uid ${options.owner!.uid}: ${String(error)}`));
      await folder.close();
    }
  } finally {
    reader.close();
  }
}

type Phase = <T>(name: CollectPhase, run: () => Promise<T>) => Promise<T>;

/** The phases from the steps before recording to postprocess, in a folder and with the target's files open. */
async function recordAndFinish<R>(
  session: Session<R>,
  phase: Phase,
  phaseMs: CollectResult<R>['phaseMs'],
  folder: OutputFolder,
  reader: TargetReader,
  chosen: { target: TargetInfo; reason: string; dir: string },
  plan: RecordPlan,
): Promise<CollectResult<R>> {
  const { options, context, signal, warn, info } = session;
  const { target, reason, dir } = chosen;
  await (await folder.folder(layout.targetDir, { create: true, mode: outputModes.privateFolder })).close();
  const stepContext: StepContext = {
    target,
    dir: folder.path,
    perfPath: options.perfPath,
    procRoot: options.procRoot,
    unwind: plan.unwind.kind,
    signal,
    warn,
    progress: info,
  };
  stepContext.sampledFiles = reader.sampledFiles;
  stepContext.readTargetElf = (path) => reader.readElf(path);
  // perf records with -N: this step keeps the target's binaries in the folder instead, within limits. .NET
  // assemblies are PE files perf cannot read: the names of their precompiled code are kept instead.
  // Those that read the target run in the target reader; kallsyms, the vdso (the sidecar's own) and the context's
  // own steps (perf map, symbols) here.
  const steps = [
    ...targetReaderSteps().map((step) => readerStep(reader, step)),
    ...kernelSteps(),
    ...(context.steps ?? []),
  ];
  const reports: Record<string, StepReport> = {};
  const recordPlan = await phase('before-recording', async () => {
    const checked = await avoidStallingFiles(session, reader, target, plan);
    await runSteps(steps, 'beforeRecording', stepContext, reports);
    return checked;
  });
  const { recorded, snapshots } = await phase('recording', () =>
    record(session, folder, reader, { target, reason }, recordPlan),
  );
  throwIfAborted(signal);
  if (recorded.outcome.abandoned) warn(`${recorded.outcome.abandoned}; its perf.data is read to its last whole record`);
  info(
    `recorded ${recorded.outcome.samples ?? 'an unknown number of'} samples in ${recorded.seconds.toFixed(1)} s (${describeEnd(recorded.outcome)})`,
  );
  await phase('after-recording', () => runSteps(steps, 'afterRecording', stepContext, reports));
  // Nothing more is read from the target: postprocess reads the folder only.
  reader.close();
  const result: CollectResult<R> = {
    dir,
    target,
    reason,
    event: plan.event,
    scope: plan.scope,
    unwind: recordPlan.unwind,
    checks: plan.checks,
    record: recorded.outcome,
    recordedSeconds: recorded.seconds,
    snapshots,
    steps: reports,
    phaseMs,
    cpuMs: recorded.cpuMs,
  };
  const run = context.postprocess;
  if (options.postprocess && run)
    result.postprocess = await phase('postprocess', () => postprocessFolder(session, run, result));
  return result;
}

function targetQuery(options: CollectOptions) {
  return {
    ...(options.pid !== undefined && { pid: options.pid }),
    ...(options.name !== undefined && { name: options.name }),
  };
}

/** The checks doctor runs, warned about or fatal, and how perf will record: event, scope, build-ids. */
async function preflight<R>(session: Session<R>, target: TargetInfo, dir: string): Promise<RecordPlan> {
  const { options, procfs, signal, warn, info } = session;
  const facts = await gatherFacts({ ...procfs, perfPath: options.perfPath, pid: target.pid, outputDir: dir, signal });
  const scope = await chooseScope(options.scope, facts.perfVersion, target.pid, procfs, facts.targetCgroup);
  const checks = judgeFacts(facts);
  if (scope.scope.kind === 'cgroup') info(scope.reason);
  // The perf-spin check says what auto found; with --scope process, the user chose (the demo's workload keeps its
  // threads).
  const chosen = (c: Check) => c.id === 'perf-spin' && options.scope === 'process';
  for (const check of checks.filter((c) => c.status === 'warn' && !chosen(c)))
    warn(`${check.message}${check.remedy ? ` (fix: ${check.remedy})` : ''}`);
  const fatal = checks.find((c) => c.status === 'fatal');
  if (fatal)
    throw new ProfcpuError('PREFLIGHT_FAILED', `cannot record: ${fatal.message}`, {
      remedy: fatal.remedy ?? 'Run `profcpu doctor` for details.',
    });
  const unwind = chooseUnwind({
    requested: options.unwind,
    stackBytes: options.stackBytes,
    durationSeconds: options.durationSeconds,
    frequency: options.frequency,
    cpus: availableParallelism(),
    arch: process.arch,
    perfCompresses: facts.perfCompresses ?? false,
    ...(facts.freeBytes !== undefined && { freeBytes: facts.freeBytes }),
  });
  if (options.unwind === 'auto')
    info(
      unwind.kind === 'mixed'
        ? `unwinding mixed (CFI and frame pointers, from stack copies): ${unwind.reason}`
        : `unwinding by frame pointer: ${unwind.reason}`,
    );
  return {
    checks,
    event: options.event ?? defaultEvent(facts),
    scope,
    buildIdMmap: buildIdMmapWorks(facts.perfVersion, facts.kernelRelease),
    noBuildIds: false,
    unwind,
    perfCompresses: facts.perfCompresses ?? false,
  };
}

/**
 * perf record reads the build-ids of the target's mapped files when it starts (--buildid-mmap) or when it ends (its
 * table): a file on a FUSE or network file system whose server stops answering would then hold perf in the kernel
 * for good, killed or not, and no sample would be written. perf reads those of executable mappings only, but of every
 * mapping with stack copies (--call-graph dwarf samples data addresses, so perf lists the data mappings too). When the
 * target maps such files so, or the reader cannot say, perf writes no build-ids (-B) and reads none of its files; the
 * reader is told what to advise if it hangs. Mixed unwinding chosen by auto gives way to frame pointers instead, when
 * only the target's data files are at stake: its build-ids are worth more than the stacks through glibc.
 */
async function avoidStallingFiles<R>(
  session: Session<R>,
  reader: TargetReader,
  target: TargetInfo,
  plan: RecordPlan,
): Promise<RecordPlan> {
  const mixed = plan.unwind.kind === 'mixed';
  // Recording every CPU (the cgroup scope), perf reads the files of every process it sees.
  const everyProcess = plan.scope.scope.kind === 'cgroup';
  const found = await reader.stallingMappings(everyProcess);
  const stalling = mixed ? found : found?.filter((m) => m.executable);
  if (stalling?.length === 0) return plan;
  const named = (m: StallingMapping) =>
    `${m.path} (${m.fsType}${m.pid !== undefined && m.pid !== target.pid ? `, process ${m.pid}` : ''})`;
  if (mixed && session.options.unwind === 'auto' && stalling && !stalling.some((m) => m.executable)) {
    const files = stalling.slice(0, 3).map(named);
    const reason =
      `${everyProcess ? 'processes perf records map' : 'the target maps'} data files from a FUSE or network file system ` +
      `(${files.join(', ')}), whose build-ids perf reads when it records stack copies (a server that stops ` +
      'answering would hold it for good)';
    session.info(`unwinding by frame pointer after all: ${reason}`);
    return { ...plan, unwind: { kind: 'fp', reason } };
  }
  const shown = stalling?.slice(0, 3).map(named);
  const subject = everyProcess ? 'processes perf records (every CPU, for the cgroup)' : `process ${target.pid}`;
  const what = shown
    ? `${everyProcess ? 'map' : 'maps'} ${stalling!.length} file(s) from a FUSE or network file system: ${shown.join(', ')}${stalling!.length > 3 ? ', ...' : ''}`
    : 'may map files from a FUSE or network file system (the mounts could not be checked)';
  session.warn(
    `${subject} ${what}; perf records without build-ids so as not to read them (a server that stops ` +
      'answering would hold perf for good); frames in those files may stay unnamed, and an output folder post-processed ' +
      'elsewhere names every native frame by its path alone',
  );
  if (shown)
    reader.adviseOnTimeout(
      `the target maps ${shown.join(', ')}: a read of such a file never returned (its server stopped answering?); ` +
        'if its reads are only slow, raise --target-timeout',
    );
  return { ...plan, buildIdMmap: false, noBuildIds: true };
}

/** The target reader, the target's root opened in it; throws TARGET_NOT_VISIBLE when it cannot be. */
function startReader<R>(
  session: Session<R>,
  target: TargetInfo,
  dir: string,
  unwind: UnwindPlan,
): Promise<TargetReader> {
  const { options, signal, warn, info } = session;
  // Asked of perf once for every step, here or in the reader (perf buildid-list reads the whole perf.data).
  const sampled = onceSampledFiles({ dir, perfPath: options.perfPath, signal });
  return TargetReader.start(
    {
      target,
      procRoot: options.procRoot,
      dir,
      perfPath: options.perfPath,
      snapshotMaxBytes: options.snapshotMaxBytes,
      unwind: unwind.kind,
    },
    { signal, warn, progress: info, sampledFiles: sampled, passTimeoutMs: options.targetTimeoutSeconds * 1000 },
  );
}

/** target.json first (an interrupted session still leaves a folder postprocess can finish), then perf record. */
async function record<R>(
  session: Session<R>,
  folder: OutputFolder,
  reader: TargetReader,
  chosen: { target: TargetInfo; reason: string },
  plan: RecordPlan,
): Promise<{ recorded: RecordedTarget; snapshots: SnapshotReport }> {
  const { options, context, procfs, signal, warn, info } = session;
  const { target, reason } = chosen;
  const written = targetJson(target, reason, plan.scope.scope);
  if (options.launcherRun) written['launcherRun'] = options.launcherRun;
  const targetText = `${JSON.stringify(written, null, 2)}\n`;
  await folder.writeFile(layout.targetInfo, targetText, outputModes.privateFile);
  // perf record writes perf.data by name: nothing else may stand there (a stale link would be written through).
  await folder.remove(layout.perfData);
  // Taken in the reader; the last report it gave is the one kept.
  let snapshots: SnapshotReport | undefined;
  const snapshotter = { refresh: async () => void (snapshots = (await reader.refresh()) ?? snapshots) };
  const { unwind } = plan;
  const unwinding =
    unwind.kind === 'mixed' ? `, a ${unwind.stackBytes}-byte stack copy a sample for mixed unwinding` : '';
  const switchCopy =
    unwind.kind === 'mixed'
      ? ` with a ${switchCopyBytes(unwind.stackBytes, options.switchStackBytes)}-byte stack copy each`
      : '';
  const switches = options.offCpu
    ? chooseSwitchShare(
        options.switchShare,
        options.switchShare === 'auto' ? await blockingSwitchRate(target.pid, procfs, undefined, signal) : undefined,
      )
    : undefined;
  if (switches) info(`off-CPU: the stacks of its switches: ${switches.reason}`);
  const windows =
    switches && switches.share < 1
      ? ` (their stacks in random windows, ${Math.round(switches.share * 100)}% of the time)`
      : '';
  const offCpu = options.offCpu ? `, and every switch off the CPU${switchCopy}${windows}` : '';
  info(
    `recording for ${options.durationSeconds} s at ${options.frequency} Hz (${plan.event}${unwinding})${offCpu}; ` +
      'Ctrl-C stops early',
  );
  const recorded = await recordTarget({
    options,
    target,
    dir: folder.path,
    event: plan.event,
    scope: plan.scope.scope,
    buildIdMmap: plan.buildIdMmap,
    noBuildIds: plan.noBuildIds,
    unwind,
    compress: plan.perfCompresses && (unwind.kind === 'mixed' || options.offCpu),
    ...(switches && { switchShare: switches.share }),
    snapshotter,
    signal,
    onRetry: warn,
    warn,
    ...(context.stop && { stop: context.stop }),
    ...(context.onRecordingProgress && { onProgress: context.onRecordingProgress }),
  });
  const missed = `not taken: ${reader.stoppedReason ?? 'the target reader gave no report'}`;
  return { recorded, snapshots: snapshots ?? missedSnapshots(target, procfs, missed) };
}

async function postprocessFolder<R>(session: Session<R>, run: PostprocessRun<R>, result: CollectResult<R>) {
  const { options, signal, warn, info } = session;
  return run(
    result.dir,
    {
      perfPath: options.perfPath,
      ...(options.offCpu && { offCpu: { minBlockUs: options.minBlockUs, preempted: false } }),
    },
    { signal, warn, progress: info, manifestExtra: { collect: manifestEntry(result, options) } },
  ).catch((error: unknown) => {
    // A terminal's second Ctrl-C also reaches perf script directly, which then fails on its own: still an abort.
    if (signal.aborted && !isProfcpuError(error, 'ABORTED')) throwIfAborted(signal);
    throw error;
  });
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
      // The reader said why it stopped, once: the steps it could not run are only reported.
      if (!(error instanceof ReaderStoppedError))
        context.warn(
          `${step.name}: ${message}${isProfcpuError(error) && error.remedy ? ` (fix: ${error.remedy})` : ''}`,
        );
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
function targetJson(target: TargetInfo, reason: string, scope: RecordScope): Record<string, unknown> {
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
    // A cgroup recording holds the cgroup's other processes too: postprocess keeps this pid's samples.
    recordScope: scope,
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
    options: {
      durationSeconds: options.durationSeconds,
      frequency: options.frequency,
      event: result.event,
      unwind: result.unwind.kind,
      ...(result.unwind.kind === 'mixed' && {
        stackBytes: result.unwind.stackBytes,
        compressed: result.unwind.compress,
      }),
      ...(options.unwind === 'auto' && { unwindChosenBecause: result.unwind.reason }),
      ...(options.offCpu && { offCpu: true, minBlockUs: options.minBlockUs }),
      ...(options.offCpu &&
        result.unwind.kind === 'mixed' && {
          switchStackBytes: switchCopyBytes(result.unwind.stackBytes, options.switchStackBytes),
        }),
      ...(options.offCpu && { switchShare: options.switchShare }),
    },
    record: {
      command: result.record.command,
      end: result.record.end,
      samples: result.record.samples,
      seconds: Number(result.recordedSeconds.toFixed(3)),
      scope: result.scope.scope,
      scopeReason: result.scope.reason,
      perfSpinsOnThreadExit: result.scope.spins,
      ...(result.record.switchWindows && { switchWindows: result.record.switchWindows }),
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

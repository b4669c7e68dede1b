// The postprocess pipeline: an output folder holding perf.data (and the target/ snapshots collect took) in, every
// output out: flamescope/perf_script.out, folded_stacks.out, flamegraph.svg, flamegraph.html, speedscope.json,
// profile.pb.gz (pprof), manifest.json and prof.tar.gz (names from src/output/layout.ts).
//
// perf script runs once; its text is teed as it streams, to the FlameScope file and into the fold, so the text is
// never held whole nor read twice. Rendering needs the finished stacks, so it starts the moment the stream ends. Every
// output is written under a `.partial` name and renamed at the end: an abort or failure (the signal kills perf script)
// leaves no half-written file and never touches target/. perf.data is changed once, when perf was killed before
// finishing it: it is then finished (src/perf/recover.ts), keeping its times and every whole record. prof.tar.gz is
// started once perf.data is final and takes each output the moment it is (src/output/tarball.ts), the FlameScope text
// as it is written, so its compression, on zlib's thread pool, runs beside the fold and the renders instead of after
// them.
import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { layout } from '../output/layout.js';
import type { Manifest } from '../output/manifest.js';
import { readTargetIds } from '../output/target-info.js';
import { startTarball, type StreamedFile, type TarballWriter } from '../output/tarball.js';
import type { StepReport } from '../step/step.js';
import { groupDigits, ignoreWarnings, type Warn } from '../diagnostics.js';
import { runtimeStubsSkipReason } from '../dotnet/runtime-stubs/runtime-stubs-step.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { OutputFolder } from '../files/output-folder.js';
import { defaultPerfPath } from '../perf/perf-path.js';
import { parseRecordingHeader, perfVersion, type RecordingHeader } from '../perf/version.js';
import { renderHtml, renderSpeedscope, renderSvg } from '../render/index.js';
import { renderPprof, type PprofOptions } from '../render/pprof.js';
import { cpuPprofOptions, pprofFolderFacts } from './pprof-options.js';
import type { HtmlOptions, SpeedscopeOptions, SvgOptions } from '../render/index.js';
import { formatFolded, inSortedOrder } from '../stacks/folded.js';
import { StackFolder, type FoldOptions, type FoldResult, type FrameResolver } from '../stacks/fold.js';
import { loadFolderResolver } from '../dotnet/naming/folder-resolver.js';
import { formatNamingAdvice, namingReport } from './naming-advice.js';
import { checkPerfData, finishPerfData } from './inputs.js';
import { hashRawData, hostFacts, writeManifest } from './manifest-writer.js';
import { PartialOutputs } from '../output/partial-outputs.js';
import { placePerfMaps, type PerfMapPlacement } from '../jit/perf-maps.js';
import { buildIdView, type BuildIdView } from '../binaries/buildid-view.js';
import { perfBuildIdDir } from '../perf/buildid-cache.js';
import { PerfScriptTee } from './tee.js';
import { pidArguments, runBuiltinAndFold, type BuiltinEngineOptions } from '../engine/builtin-engine.js';
import { builtinShortfall, type Engine, type Shortfall } from '../engine/engine-choice.js';
import { inspectPerfData, type PerfDataHeader, type ReadHandlers } from '../engine/perf-data/reader.js';
import { ibtPltTables } from '../engine/frame-symbols.js';
import { PltRenamer, pltRenameWarning } from '../engine/plt-rename.js';
import type { UnwindTally } from '../engine/unwind/sample-unwind.js';
import type { PerfMapUse } from '../jit/jit-maps.js';
import {
  foldOffCpu,
  offCpuReading,
  offCpuRecording,
  switchEvent,
  type OffCpuFoldOptions,
} from '../engine/offcpu/offcpu-fold.js';
import {
  defaultOffCpuOptions,
  offCpuUnwoundNotice,
  writeOffCpuOutputs,
  type OffCpuOptions,
  type OffCpuReport,
} from './offcpu-outputs.js';

/** Builds a resolver for a folder's snapshots (target/perf-N.map, target/jit-N.dump, target/maps...). */
export type FrameResolverFactory = (
  dir: string,
  warn: Warn,
) => FrameResolver | undefined | Promise<FrameResolver | undefined>;

export interface PostprocessOptions {
  /** Fold options (src/stacks/fold.ts). Default `{}`: the fold stage's defaults. */
  fold: Partial<FoldOptions>;
  /** Title of the SVG and HTML flame graphs and name of the speedscope profile. Default: each renderer's own. */
  title: string | undefined;
  /** SVG options (src/render/svg.ts); `title` above wins over `svg.title`. Default `{}`. */
  svg: Partial<SvgOptions>;
  /** HTML options (src/render/html.ts). Default `{}`. */
  html: Partial<HtmlOptions>;
  /** speedscope options (src/render/speedscope.ts). Default `{}`. */
  speedscope: Partial<SpeedscopeOptions>;
  /**
   * Names frames perf left unnamed, or a factory building one from the folder. Default: the .NET resolver over the
   * folder's perf map, jitdump and maps snapshots (src/dotnet/naming/folder-resolver.ts).
   */
  resolver: FrameResolver | FrameResolverFactory | undefined;
  /** The perf executable. Default `perf` (on PATH). */
  perfPath: string;
  /** Arguments appended to `perf script -i perf.data --header --no-inline`. Default none. */
  perfScriptArgs: readonly string[];
  /** Read a perf.data owned by another user (perf's -f). Default false. */
  force: boolean;
  /** Place target/perf-<nspid>.map at /tmp/perf-<pid>.map while perf script runs (see perf-maps.ts). Default true. */
  placePerfMaps: boolean;
  /** Write prof.tar.gz. Default true. */
  tarball: boolean;
  /**
   * Run perf script where it cannot see the live target (its own PID namespace: src/perf/script.ts), so it names
   * frames from what the folder holds, never from the target's files as they are now. Default true; used only where
   * it works (root, or user namespaces allowed).
   */
  isolate: boolean;
  /** Milliseconds between progress lines while perf script streams. Default 1000. */
  progressIntervalMs: number;
  /**
   * Who reads perf.data: `perf` (perf script), `native` (profcpu's own reader, src/engine/builtin-engine.ts,
   * which needs no perf; `perfScriptArgs` may then hold only `--pid=N`), or `auto`: the built-in engine, unless the
   * recording holds what it does not read the way perf does (engine-choice.ts), which then goes to perf script with
   * a warning saying why (or, with no perf installed, fails saying so). `native` asked for fails on such a
   * recording. Default `auto`: the built-in engine writes the same frames and folds as perf script on the test corpus
   * (test/engine/perf-corpus.test.ts, engines.test.ts), with no perf installed.
   */
  engine: Engine | 'auto';
  /**
   * The off-CPU profile of a recording made with `collect --off-cpu` (offcpu-outputs.ts): the shortest stretch off the
   * CPU kept, and whether time waiting for a CPU counts. Always read by the built-in engine: perf script does not pair
   * a thread's switches.
   */
  offCpu: OffCpuOptions;
}

export type { Engine } from '../engine/engine-choice.js';

/**
 * perf.data's size from which the outputs and raw data are hashed on a worker thread; below it they are hashed on the
 * main thread as they are written. SHA-256 runs at 1-3 GB/s here (SHA extensions): at 100k samples (22 MB perf.data,
 * 142 MB of FlameScope text) the worker took as much of the main thread (handing it buffers) as hashing there, and
 * more CPU in all (its start, 40-150 ms), which on 2 busy cores cost wall time. Only far larger recordings (~1 GB of
 * text and up) might gain from it: not measured.
 */
const hashOffThreadFrom = 128 << 20;

export const defaultPostprocessOptions: Readonly<PostprocessOptions> = Object.freeze({
  fold: Object.freeze({}),
  title: undefined,
  svg: Object.freeze({}),
  html: Object.freeze({}),
  speedscope: Object.freeze({}),
  resolver: loadFolderResolver,
  perfPath: defaultPerfPath,
  perfScriptArgs: Object.freeze([]),
  force: false,
  placePerfMaps: true,
  tarball: true,
  isolate: true,
  progressIntervalMs: 1000,
  engine: 'auto',
  offCpu: defaultOffCpuOptions,
});

export interface PostprocessContext {
  signal?: AbortSignal;
  warn?: Warn;
  progress?: (message: string) => void;
  /** Added to manifest.json at the top level (collect: target info, its commands, timings). */
  manifestExtra?: Record<string, unknown>;
}

export interface PostprocessResult {
  /** The output folder, absolute. */
  dir: string;
  /** Absolute paths of the files written, by layout name (`flamegraph.svg`, `flamescope/perf_script.out`...). */
  files: Record<string, string>;
  fold: FoldResult;
  manifest: Manifest;
  /** The off-CPU profile's figures, when the recording holds the switches (`collect --off-cpu`). */
  offCpu?: OffCpuReport;
}

export async function postprocess(
  folder: string,
  options: Partial<PostprocessOptions> = {},
  context: PostprocessContext = {},
): Promise<PostprocessResult> {
  const dir = resolve(folder);
  const opts: PostprocessOptions = { ...defaultPostprocessOptions, ...options };
  try {
    context.signal?.throwIfAborted();
    const euid = effectiveUid();
    const perfData = await checkPerfData(dir, { force: opts.force, euid });
    const opened = await OutputFolder.open(dir);
    const run = {
      dir,
      folder: opened,
      euid,
      perfDataMtimeMs: perfData.stat.mtimeMs,
      perfDataBytes: perfData.stat.size,
    };
    try {
      try {
        return await postprocessFolder(run, opts, context);
      } catch (error) {
        // The built-in engine met, past the engine choice, what it does not read (a zstd window it does not decode,
        // deep in the file): under `auto`, perf script reads the recording instead, from the start (the first
        // attempt's outputs were discarded).
        if (!(error instanceof BuiltinShortfall) || opts.engine !== 'auto')
          throw error instanceof BuiltinShortfall ? error.cause : error;
        return await postprocessFolder(run, opts, context, { why: error.message });
      }
    } finally {
      await opened.close();
    }
  } catch (error) {
    throw explainFailure(error, dir, context.signal);
  }
}

/** The folder being post-processed: its path as given, the folder opened, who runs perf, perf.data's mtime and size. */
interface Run {
  dir: string;
  folder: OutputFolder;
  euid: number | undefined;
  perfDataMtimeMs: number;
  perfDataBytes: number;
}

/** perf script and the fold, the renders, the manifest, the tarball: the stages postprocess() wraps. */
async function postprocessFolder(
  run: Run,
  options: PostprocessOptions,
  context: PostprocessContext,
  shortfall?: Shortfall,
): Promise<PostprocessResult> {
  const { dir, folder } = run;
  const { signal, warn = ignoreWarnings, progress = () => {} } = context;
  const { durationsMs, timed } = phaseTimer();
  const recovered = await finishPerfData(folder, warn, signal);
  const chosen = await chooseEngine(run, options, warn, shortfall);
  const offCpu = chosen.header && offCpuRecording(chosen.header);
  const filtered = await withTargetFilter(folder, options);
  // The pprof profiles carry the address of each frame left unnamed, for a backend that has its debug file.
  const fold = { keepAddresses: true, ...filtered.fold };
  const opts = withCpuEvent({ ...filtered, fold, engine: chosen.engine }, offCpu);
  const { perfVersionPromise, resolving, outputs, rawHashes } = startAlongside(run, opts, warn, signal);
  let tarball: TarballWriter | undefined;
  try {
    // The raw data is final from here: it is archived (and compressed off the main thread) while the outputs are made.
    if (opts.tarball) tarball = await startTarballOf(run);
    const scriptCommand = await perfScriptCommand(opts);
    // Either engine gives the archive the FlameScope text as it writes it, to be compressed meanwhile.
    const archive = await tarball?.streamFile(layout.perfScript);
    // The built-in engine makes the off-CPU fold in the same read: the recording is read and decompressed once.
    const offCpuRead =
      offCpu && opts.engine === 'native'
        ? await offCpuReading(folder, offCpuFoldOptions(opts), { warn, resolver: await resolving })
        : undefined;
    const engineContext = {
      signal,
      warn,
      progress,
      euid: run.euid,
      archive,
      header: chosen.header,
      alongside: offCpuRead?.handlers,
    };
    const script = await timed('perfScript', () => readRecording(folder, opts, outputs, engineContext, resolving));
    const offCpuFolded = await offCpuRead?.finish();
    const { fold } = script;
    // A target that waited the whole time took no CPU sample: its off-CPU profile is what was asked for.
    if (offCpu && fold.keptSamples === 0)
      warn(`no ${offCpu.cpuEvent} samples of the target: it was off the CPU the whole time (see ${layout.offCpuSvg})`);
    else checkSamples(fold, dir);
    const naming = reportNaming(script, context.manifestExtra, warn);
    const recording = withSampleTimes(script.header, fold);
    const pprof = await pprofFolderFacts(folder, run.perfDataMtimeMs, recording.sampleDurationMs, warn);
    const cpuPprof = cpuPprofOptions(fold, chosen.header, opts.fold.weight, pprof);
    await timed('render', () => writeRenders(outputs, fold, opts, cpuPprof, signal, archiveInto(tarball, outputs)));
    const offCpuReport =
      offCpu &&
      (await timed('offCpu', async () =>
        writeOffCpuOutputs(
          outputs,
          {
            folded:
              offCpuFolded ??
              (await foldOffCpu(folder, offCpuFoldOptions(opts), { signal, warn, resolver: script.resolver })),
            offCpu: opts.offCpu,
            pprof,
            cpuFrameFiles: fold.frameFiles,
            cpuAddressed: fold.addressed,
            // Weighed by period, the CPU stacks count events (cycles, ns) whose time the view cannot tell.
            ...(opts.fold.weight !== 'period' && { cpuStacks: fold.stacks }),
            ...(opts.title !== undefined && { title: opts.title }),
          },
          signal,
          archiveInto(tarball, outputs),
        ),
      ));
    if (offCpuReport?.unwound) progress(offCpuUnwoundNotice(offCpuReport.unwound));
    if (offCpuReport && fold.keptSamples === 0 && offCpuReport.blockedUs === 0) checkSamples(fold, dir);
    const files = await outputs.commit();

    // Phases after this point cannot time themselves into the manifest they write.
    const commands = scriptCommand ? [[opts.perfPath, 'version'], scriptCommand] : [];
    const manifest = await writeManifest(
      dir,
      outputs,
      {
        createdAt: new Date().toISOString(),
        host: await hostFacts(perfVersionPromise),
        recording,
        postprocess: postprocessFacts(script, chosen, commands, durationsMs, recovered),
        samples: sampleCounts(fold),
        skipped: fold.skipped,
        naming,
        ...(offCpuReport && { offCpu: offCpuReport }),
      },
      { rawHashes, extra: context.manifestExtra, warn, signal },
    );
    Object.assign(files, await outputs.commit());
    if (tarball) files[layout.tarball] = await finishTarball(tarball, { signal, warn, progress });
    return { dir, files, fold, manifest, ...(offCpuReport && { offCpu: offCpuReport }) };
  } finally {
    await tarball?.abandon();
    await outputs.discard();
  }
}

/** The off-CPU fold's options, from postprocess's. */
function offCpuFoldOptions(opts: PostprocessOptions): OffCpuFoldOptions {
  return {
    fold: opts.fold,
    minBlockUs: opts.offCpu.minBlockUs,
    preempted: opts.offCpu.preempted,
    pids: pidArguments(opts.perfScriptArgs),
  };
}

/** Each phase's duration for the manifest, and `timed`, which measures one phase into them. */
function phaseTimer() {
  const durationsMs: Record<string, number> = {};
  const timed = async <T>(phase: string, work: () => Promise<T>): Promise<T> => {
    const start = performance.now();
    try {
      return await work();
    } finally {
      durationsMs[phase] = Math.round(performance.now() - start);
    }
  };
  return { durationsMs, timed };
}

/** What runs beside the engine from the start: perf's version asked, the resolver built, the hashes taken. */
function startAlongside(run: Run, opts: PostprocessOptions, warn: Warn, signal: AbortSignal | undefined) {
  const perfVersionPromise =
    opts.engine === 'native'
      ? Promise.resolve('not used (native engine)')
      : perfVersion({ perfPath: opts.perfPath, signal }).catch(() => 'unknown');
  // Built while perf script starts up (it loads symbols before printing anything); the fold waits for it.
  const resolving = Promise.resolve(typeof opts.resolver === 'function' ? opts.resolver(run.dir, warn) : opts.resolver);
  resolving.catch(() => {});
  const outputs = new PartialOutputs(run.folder, { hashOffThread: run.perfDataBytes >= hashOffThreadFrom });
  // The raw data does not change while perf script reads it: hash it meanwhile (off the main thread) rather than
  // afterwards.
  const rawHashes = hashRawData(run.dir, outputs.hashing, signal);
  rawHashes.catch(() => {});
  return { perfVersionPromise, resolving, outputs, rawHashes };
}

/**
 * perf script's command for the manifest, none for the built-in engine. Run in the folder on `perf.data`, so the
 * command in the manifest holds no absolute path and can be rerun there. The perf engine's code (and execa's) loads
 * only for that engine.
 */
async function perfScriptCommand(opts: PostprocessOptions): Promise<string[] | undefined> {
  return opts.engine === 'native'
    ? undefined
    : [opts.perfPath, ...(await import('../perf/script.js')).perfScriptArgs(layout.perfData, perfScriptOptions(opts))];
}

/** The recording read by the chosen engine: its text written to the FlameScope file and folded. */
function readRecording(
  folder: OutputFolder,
  opts: PostprocessOptions & Pick<BuiltinEngineOptions, 'skipEvents'>,
  outputs: PartialOutputs,
  context: ScriptContext,
  resolving: Promise<FrameResolver | undefined>,
) {
  const { signal, warn, progress, archive, alongside } = context;
  return opts.engine === 'native'
    ? runBuiltinAndFold(folder, opts, outputs, { signal, warn, progress, archive, alongside }, resolving).catch(
        (error: unknown) => {
          throw isProfcpuError(error, 'NEEDS_PERF') ? new BuiltinShortfall(error) : error;
        },
      )
    : runScriptAndFold(folder, opts, outputs, context, resolving);
}

type EngineRun = Awaited<ReturnType<typeof readRecording>>;

/** The naming report for the manifest; its advice, if any, warned. */
function reportNaming(script: EngineRun, manifestExtra: PostprocessContext['manifestExtra'], warn: Warn) {
  const { fold } = script;
  const collectSteps = (manifestExtra?.['collect'] as { steps?: Record<string, StepReport> } | undefined)?.steps;
  const naming = namingReport(fold.quality, script.resolver, {
    runtimeStubsSkipped: runtimeStubsSkipReason(collectSteps?.['runtime-stubs']),
    memfdFrames: [...fold.stacks.keys()].some((stack) => stack.includes('[memfd:doublemapper')),
  });
  if (naming.advice) for (const line of formatNamingAdvice(naming.advice)) warn(line);
  return naming;
}

/** Each output goes into the tarball as soon as it is final, to be compressed while the next one is rendered. */
function archiveInto(tarball: TarballWriter | undefined, outputs: PartialOutputs) {
  return async (name: string) => {
    const partial = outputs.partialOf(name);
    if (tarball && partial) await tarball.addFile(name, partial);
  };
}

/** The manifest's `postprocess`: the engine, its commands, the phases' durations, what perf script did. */
function postprocessFacts(
  script: EngineRun,
  chosen: { engine: Engine; handOver?: string },
  commands: string[][],
  durationsMs: Record<string, number>,
  recovered: Awaited<ReturnType<typeof finishPerfData>>,
) {
  return {
    engine: chosen.engine,
    ...(chosen.handOver && { handOver: chosen.handOver }),
    commands,
    durationsMs,
    perfScriptBytes: script.scriptBytes,
    ...(script.linesCut > 0 && { linesCut: script.linesCut }),
    perfScriptIsolated: script.isolated,
    perfMaps: script.perfMaps,
    ...(script.jitMaps.length > 0 && { jitMaps: script.jitMaps }),
    ...(script.pltRenamed.length > 0 && { pltRenamed: script.pltRenamed }),
    ...(script.unwound && { unwound: script.unwound }),
    keptBinariesPlaced: script.keptBinaries,
    ...(recovered && { recovered }),
  };
}

/** The manifest's `samples`: counts from the fold. */
function sampleCounts(fold: FoldResult) {
  return {
    parsed: fold.samples,
    kept: fold.keptSamples,
    weight: fold.weight,
    distinctStacks: fold.stacks.size,
    events: fold.events,
    ...(fold.events.length > 1 && { byEvent: fold.eventSamples }),
    ...(fold.foldedEvent !== undefined && { folded: fold.foldedEvent }),
  };
}

/**
 * The recording's header, its sample times (perf.data's SAMPLE_TIME feature, 0 when perf skipped the pass that fills
 * it: --buildid-mmap, a recording cut short) taken from the samples read when it has none.
 */
function withSampleTimes(header: RecordingHeader, fold: FoldResult): RecordingHeader {
  if (!fold.times || (header.firstSampleTime && header.lastSampleTime)) return header;
  const { first, last } = fold.times;
  return {
    ...header,
    firstSampleTime: first,
    lastSampleTime: last,
    sampleDurationMs: Math.round((last - first) * 1e6) / 1e3,
    sampleTimesFrom: 'samples',
  };
}

/**
 * The engine that reads this recording: perf, or the built-in engine unless the recording holds what it does not read
 * the way perf does (engine-choice.ts); then, for `auto`, perf with a warning, or an error when perf is missing; for
 * `native`, an error.
 */
async function chooseEngine(
  run: Run,
  options: PostprocessOptions,
  warn: Warn,
  found?: Shortfall,
): Promise<{ engine: Engine; handOver?: string; header?: PerfDataHeader }> {
  if (options.engine === 'perf') {
    // The header still says whether the recording holds an off-CPU profile (which the built-in engine reads).
    const inspected = await inspectPerfData(join(run.dir, layout.perfData), { name: layout.perfData }).catch(
      () => undefined,
    );
    return { engine: 'perf', ...(inspected && { header: inspected.header }) };
  }
  // perf.data's header comes along, for perf script's run when it reads the recording (runScriptAndFold).
  const outline = found ? undefined : await inspectPerfData(join(run.dir, layout.perfData), { name: layout.perfData });
  const header = outline?.header;
  const shortfall = found ?? builtinShortfall(outline!);
  if (!shortfall) return { engine: 'native', header };
  const instead = shortfall.recordInstead ? `; or ${shortfall.recordInstead}` : '';
  if (options.engine === 'native')
    throw new ProfcpuError('NEEDS_PERF', shortfall.why, {
      remedy: `Leave out --engine native to have perf script read it (or pass --engine perf)${instead}.`,
    });
  const { isInstalled } = await import('../perf/select.js');
  if (!(await isInstalled(options.perfPath)))
    throw new ProfcpuError('NEEDS_PERF', `${shortfall.why}, and perf, which reads it, is not installed here`, {
      remedy: `Install perf (Debian: apt-get install linux-perf) or pass --perf PATH, and run again${instead}.`,
    });
  warn(`${shortfall.why}: perf script reads it instead (${options.perfPath})`);
  return { engine: 'perf', handOver: shortfall.why, header };
}

/** The built-in engine's NEEDS_PERF, met while it read (a shortfall the engine choice could not see coming). */
class BuiltinShortfall extends Error {
  constructor(override readonly cause: ProfcpuError) {
    super(cause.message);
  }
}

/**
 * An off-CPU recording's CPU profile is its CPU event's samples only: the fold keeps that event (perf script prints the
 * switches too), the built-in engine leaves the switches out of the FlameScope text as well.
 */
function withCpuEvent(
  opts: PostprocessOptions,
  offCpu: { cpuEvent: string } | undefined,
): PostprocessOptions & Pick<BuiltinEngineOptions, 'skipEvents'> {
  if (!offCpu) return opts;
  return {
    ...opts,
    fold: { ...opts.fold, eventFilter: opts.fold.eventFilter || offCpu.cpuEvent },
    skipEvents: new Set([switchEvent]),
  };
}

/** A recording of the target's cgroup holds its other processes too: perf script keeps the target's samples. */
async function withTargetFilter(folder: OutputFolder, opts: PostprocessOptions): Promise<PostprocessOptions> {
  const ids = await readTargetIds(folder);
  if (!ids?.recordedCgroup || opts.perfScriptArgs.some((a) => a.startsWith('--pid'))) return opts;
  return { ...opts, perfScriptArgs: [...opts.perfScriptArgs, `--pid=${ids.pid}`] };
}

/**
 * prof.tar.gz of the folder, dated like perf.data so the same folder gives the same tarball: perf.data and target/ go
 * in first, the outputs when finishTarball adds them.
 */
function startTarballOf(run: Run): Promise<TarballWriter> {
  const mtime = new Date(Math.floor(run.perfDataMtimeMs / 1000) * 1000);
  const first = [layout.perfData, layout.targetDir];
  return startTarball(run.folder.path, { folder: run.folder, name: layout.tarball }, first, { mtime });
}

async function finishTarball(
  writer: TarballWriter,
  context: Pick<PostprocessContext, 'signal'> & Required<Pick<PostprocessContext, 'warn' | 'progress'>>,
): Promise<string> {
  context.signal?.throwIfAborted();
  context.progress(`writing ${layout.tarball}`);
  const tarball = await writer.finish();
  for (const path of tarball.skipped)
    context.warn(`${layout.tarball}: left out ${path} (not a regular file or folder)`);
  return tarball.path;
}

/** An abort is ABORTED with how to resume; a system error writing outputs is IO with a remedy; others as they are. */
function explainFailure(error: unknown, dir: string, signal: AbortSignal | undefined): unknown {
  if (signal?.aborted && !isProfcpuError(error, 'ABORTED'))
    return new ProfcpuError('ABORTED', `post-processing ${dir} was aborted`, {
      remedy: `Run \`profcpu postprocess --dir ${dir}\` again when you like: its raw data was kept.`,
      cause: error,
    });
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (!isProfcpuError(error) && typeof code === 'string' && /^E[A-Z]+$/.test(code))
    return new ProfcpuError('IO', `cannot write the outputs in ${dir}: ${(error as Error).message}`, {
      remedy: 'Check the folder is writable and its disk has room, or copy the folder somewhere writable.',
      cause: error,
    });
  return error;
}

/** The effective uid (libuv's passwd lookup uses geteuid), or undefined where the uid has no passwd entry. */
function effectiveUid(): number | undefined {
  try {
    return userInfo().uid;
  } catch {
    return undefined;
  }
}

function perfScriptOptions(opts: PostprocessOptions) {
  return { extraArgs: opts.perfScriptArgs, force: opts.force };
}

/** What the engine that reads the recording is given beside the folder and the options. */
type ScriptContext = Required<Pick<PostprocessContext, 'warn' | 'progress'>> & {
  signal: AbortSignal | undefined;
  euid: number | undefined;
  /** The FlameScope file's entry in prof.tar.gz, given its bytes as they are written. */
  archive: StreamedFile | undefined;
  /** perf.data's header, when the engine choice read it already. */
  header: PerfDataHeader | undefined;
  /** Another reader of the recording, given its events by the built-in engine as it reads them (off-CPU's). */
  alongside?: ReadHandlers | undefined;
};

/** Runs perf script once, teeing its text into the FlameScope file and the fold, with perf maps placed meanwhile. */
async function runScriptAndFold(
  folder: OutputFolder,
  opts: PostprocessOptions,
  outputs: PartialOutputs,
  context: ScriptContext,
  resolving: Promise<FrameResolver | undefined>,
) {
  const { signal, warn } = context;
  const { isolationAvailable, perfScript } = await import('../perf/script.js');
  const dir = folder.path;
  let stackFolder: StackFolder | undefined;
  // Until the first chunk arrives the resolver may still be loading; awaiting it there holds perf back meanwhile.
  const startFold = async () => {
    if (stackFolder) return stackFolder;
    const resolver = await resolving;
    if (resolver) tee.nameFrames(resolver);
    return (stackFolder ??= new StackFolder(opts.fold, warn, resolver));
  };
  const tee = new PerfScriptTee(
    await outputs.open(layout.perfScript),
    (chunk) => stackFolder!.write(chunk),
    context.archive,
  );
  const { report, reportEach } = scriptProgress(tee, context.progress, opts.progressIntervalMs);
  let placement: PerfMapPlacement | undefined;
  let view: BuildIdView | undefined;
  const renamer = await pltRenamerFor(folder, opts, context.header);
  try {
    // placePerfMaps removes what it placed itself if it fails; from here on, `finally` does.
    if (opts.placePerfMaps) placement = await placePerfMaps(folder, warn, { euid: context.euid });
    view = await buildIdView(folder, await perfBuildIdDir({ perfPath: opts.perfPath, signal }), warn, signal);
    const wrapper = await isolationWrapper(opts, isolationAvailable, warn, signal);
    const run = await perfScript(
      layout.perfData,
      async (chunk) => {
        await startFold();
        await tee.sink(renamer ? renamer.transform(chunk) : chunk);
        reportEach();
      },
      {
        ...perfScriptOptions(opts),
        perfPath: opts.perfPath,
        signal,
        cwd: dir,
        ...(wrapper && { wrapper }),
        ...(view && { buildIdDir: view.dir }),
      },
    );
    const rest = renamer?.end();
    if (rest && rest.length > 0) await tee.sink(rest);
    await tee.finish();
    report();
    warnAfterScript(tee, renamer, run.stderrTail, warn);
    return {
      fold: (await startFold()).end(),
      resolver: await resolving,
      header: parseRecordingHeader(tee.headerLines()),
      scriptBytes: run.bytes,
      linesCut: tee.linesCut,
      isolated: wrapper !== undefined,
      perfMaps: placement?.placed.map(({ from, placedAt }) => ({ from, placedAt })) ?? [],
      jitMaps: [] as PerfMapUse[],
      pltRenamed: [...(renamer?.renamed ?? [])].sort(),
      keptBinaries: view?.placed ?? 0,
      unwound: undefined as UnwindTally | undefined,
    };
  } catch (error) {
    tee.destroy();
    throw error;
  } finally {
    await placement?.remove();
    await view?.remove();
  }
}

/** perf script's progress line: `report` says it now, `reportEach` once `intervalMs` have passed since it last did. */
function scriptProgress(tee: PerfScriptTee, progress: (message: string) => void, intervalMs: number) {
  let lastProgress = performance.now();
  const report = () =>
    progress(`perf script: ${formatMegabytes(tee.counts.bytes)} read, ${groupDigits(tee.counts.samples)} samples`);
  const reportEach = () => {
    if (performance.now() - lastProgress >= intervalMs) {
      lastProgress = performance.now();
      report();
    }
  };
  return { report, reportEach };
}

/**
 * perf 6.1's names of calls through a .plt.sec, renamed as the built-in engine names them (plt-rename.ts).
 * (perf itself says what is wrong with a perf.data it cannot read: a failed look here leaves its text as it is.)
 */
async function pltRenamerFor(
  folder: OutputFolder,
  opts: PostprocessOptions,
  known: PerfDataHeader | undefined,
): Promise<PltRenamer | undefined> {
  const header = known
    ? Promise.resolve(known)
    : inspectPerfData(join(folder.path, layout.perfData), { name: layout.perfData }).then((outline) => outline.header);
  const pltTables = await header
    .then((read) => ibtPltTables(folder, read, { demangle: !opts.perfScriptArgs.includes('--no-demangle') }))
    .catch(() => undefined);
  return pltTables && pltTables.size > 0 ? new PltRenamer(pltTables) : undefined;
}

/** The wrapper that gives perf script a PID namespace of its own, when asked for and possible; said when not. */
async function isolationWrapper(
  opts: PostprocessOptions,
  isolationAvailable: (typeof import('../perf/script.js'))['isolationAvailable'],
  warn: Warn,
  signal: AbortSignal | undefined,
): Promise<readonly string[] | undefined> {
  const wrapper = opts.isolate ? await isolationAvailable({ perfPath: opts.perfPath, signal }) : undefined;
  if (opts.isolate && !wrapper)
    warn(
      'perf script runs beside the target (unshare cannot make it a PID namespace here): it may read the live ' +
        "target's perf map and binaries, which a hostile target controls",
    );
  return wrapper;
}

/** What is left to say once perf script has run: calls renamed, its own warnings, lines cut. */
function warnAfterScript(tee: PerfScriptTee, renamer: PltRenamer | undefined, stderrTail: string, warn: Warn): void {
  if (renamer && renamer.renamed.size > 0) warn(pltRenameWarning(renamer.renamed));
  if (stderrTail) warnPerfStderr(stderrTail, warn);
  if (tee.linesCut > 0)
    warn(
      `${tee.linesCut} lines of perf script were longer than 16 KiB and were cut (a name in the target's perf map ` +
        'or jitdump that long is not a real method name)',
    );
}

/** perf script's warnings (lost chunks, maps it could not open), passed on once each. */
function warnPerfStderr(stderr: string, warn: Warn): void {
  const lines = [...new Set(stderr.split('\n').map((line) => line.trim()))].filter((line) => line !== '');
  const shown = lines.slice(-5);
  for (const line of shown) warn(`perf script: ${line}`);
  if (lines.length > shown.length) warn(`perf script: (${lines.length - shown.length} earlier messages not shown)`);
}

/** Fails when there is nothing to draw, telling "nothing recorded" apart from "everything filtered out". */
function checkSamples(fold: FoldResult, dir: string): void {
  if (fold.samples === 0) {
    throw new ProfcpuError('NO_SAMPLES', `no samples collected: ${join(dir, layout.perfData)} holds no samples`, {
      remedy:
        'Record again for longer or at a higher frequency (-F), and check the target was busy on CPU and was the ' +
        'right process (`profcpu ps`); `profcpu doctor` checks perf’s permissions.',
    });
  }
  if (fold.keptSamples === 0) {
    throw new ProfcpuError(
      'ALL_FILTERED',
      `all samples filtered out: ${groupDigits(fold.samples)} samples were read but the fold options kept none`,
      { remedy: 'Loosen the filters (event, pid, tid...) or drop them to keep every sample.' },
    );
  }
}

async function writeRenders(
  outputs: PartialOutputs,
  fold: FoldResult,
  opts: PostprocessOptions,
  pprof: Partial<PprofOptions>,
  signal: AbortSignal | undefined,
  written: (name: string) => Promise<void>,
): Promise<void> {
  const title = opts.title === undefined ? {} : { title: opts.title };
  // Sorted once here rather than by each of the four outputs (same bytes: each still sorts).
  const stacks = inSortedOrder(fold.stacks);
  const write = async (name: string, content: string | Uint8Array) => {
    await outputs.write(name, content);
    await written(name);
  };
  await write(layout.foldedStacks, [...formatFolded(stacks)].join(''));
  signal?.throwIfAborted();
  await write(layout.flamegraphSvg, renderSvg(stacks, { ...opts.svg, ...title }));
  signal?.throwIfAborted();
  await write(layout.flamegraphHtml, renderHtml(stacks, { ...opts.html, ...title }));
  signal?.throwIfAborted();
  const name = opts.title === undefined ? {} : { name: opts.title };
  await write(layout.speedscope, renderSpeedscope(stacks, { ...opts.speedscope, ...name }));
  signal?.throwIfAborted();
  await write(layout.pprof, renderPprof(stacks, pprof));
}

function formatMegabytes(bytes: number): string {
  const mb = bytes / 1e6;
  return mb < 10 ? `${mb.toFixed(1)} MB` : `${groupDigits(Math.round(mb))} MB`;
}

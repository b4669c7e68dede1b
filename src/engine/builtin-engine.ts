// The built-in engine of postprocess: perf.data read by profcpu itself (src/engine/perf-data/), with no perf installed. Takes
// the output folder, gives what runScriptAndFold gives for perf script: the same perf-script text in the FlameScope
// file and the same folds, so the two engines differ only in who wrote the text; the samples are folded as they are
// made rather than parsed back from the text (script-output.ts). Names come from the folder
// (kallsyms snapshot, kept binaries, perf-map copies: frame-symbols.ts) and, for frames left unnamed, from the
// resolver as with perf.
import { layout } from '../output/layout.js';
import type { StreamedFile } from '../output/tarball.js';
import type { Warn } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import type { OutputFolder } from '../files/output-folder.js';
import { readPerfDataFile, type ReadHandlers } from './perf-data/reader.js';
import { ScriptTextWriter } from './script-text.js';
import { parseRecordingHeader } from '../perf/version.js';
import { StackFolder, type FrameResolver } from '../stacks/fold.js';
import { PerfMaps } from '../jit/jit-maps.js';
import { pltRenameWarning } from './plt-rename.js';
import { builtinEngineSymbols, recordedHere } from './frame-symbols.js';
import type { PartialOutputs } from '../output/partial-outputs.js';
import { mapsToPlace } from '../jit/perf-maps.js';
import type { FoldOptions } from '../stacks/fold.js';
import { BuiltinScriptOutput } from './script-output.js';
import type { UnwindTally } from './unwind/sample-unwind.js';

/** The processes `--pid=N[,M]` among perf script's arguments keeps, its other arguments left aside. */
export function pidArguments(args: readonly string[]): Set<number> | undefined {
  const pids = args.flatMap((arg) => /^--pid=(\d+(?:,\d+)*)$/.exec(arg)?.[1]?.split(',').map(Number) ?? []);
  return pids.length > 0 ? new Set(pids) : undefined;
}

/**
 * The processes to keep, from the perf script arguments the built-in engine understands: `--pid=N[,M]`, and
 * `--no-demangle` (C++ names as they are, read in runBuiltinAndFold).
 */
export function builtinPidFilter(args: readonly string[]): Set<number> | undefined {
  for (const arg of args)
    if (arg !== '--no-demangle' && !/^--pid=\d+(?:,\d+)*$/.test(arg))
      throw new ProfcpuError('USAGE', `the native engine does not take the perf script argument ${arg}`, {
        remedy: 'Use `--engine perf` to pass arguments to perf script.',
      });
  return pidArguments(args);
}

/**
 * What a DWARF recording's flame graph is made of: stacks unwound by the built-in engine, not perf's unwinder, which
 * stops in .NET's code (no CFI: this one steps through it by frame pointers) and gives up in places where CFI would
 * take it further; each walk ends at the thread's start, at the end of the stack copy, or at other code without CFI.
 * A line of progress, not a warning: collect records so by default (the manifest keeps the figures).
 */
export function unwoundNotice(unwound: UnwindTally): string {
  const percent = (n: number) => `${((100 * n) / unwound.samples).toFixed(1)}%`;
  const whole = unwound.stops.end ?? 0;
  const cut = unwound.stops['outside-stack'] ?? 0;
  const parts = [`${percent(whole)} to their thread's start`];
  if (cut > 0) parts.push(`${percent(cut)} cut at the end of the stack copy (--stack-size)`);
  if (unwound.framePointerSamples > 0)
    parts.push(
      `${percent(unwound.framePointerSamples)} through .NET's code by its frame pointers, where perf’s own DWARF ` +
        'unwinding stops (`--engine perf` draws perf’s)',
    );
  return `unwound the stack copies of ${unwound.samples} samples: ${parts.join('; ')}`;
}

/** What the built-in engine takes of postprocess's options (src/postprocess/postprocess.ts documents each). */
export interface BuiltinEngineOptions {
  fold: Partial<FoldOptions>;
  /** Only `--pid=N` (or `--pid N,M`) is read here. */
  perfScriptArgs: readonly string[];
  progressIntervalMs: number;
  /** Events whose samples are left out (an off-CPU recording's switches: see ScriptTextOptions). Default: none. */
  skipEvents?: ReadonlySet<string>;
}

export async function runBuiltinAndFold(
  folder: OutputFolder,
  opts: BuiltinEngineOptions,
  outputs: PartialOutputs,
  context: {
    signal: AbortSignal | undefined;
    warn: Warn;
    progress: (message: string) => void;
    /** The FlameScope file's entry in prof.tar.gz, given its bytes as they are written. */
    archive: StreamedFile | undefined;
    /** Another reader of the same records (the off-CPU fold's), given each event after this one: one read for both. */
    alongside?: ReadHandlers | undefined;
  },
  resolving: Promise<FrameResolver | undefined>,
) {
  const { signal, warn, progress, alongside } = context;
  const pids = builtinPidFilter(opts.perfScriptArgs);
  const resolver = await resolving;
  const stackFolder = new StackFolder(opts.fold, warn, resolver);
  const output = new BuiltinScriptOutput(
    await outputs.openHashed(layout.perfScript),
    stackFolder,
    resolver,
    context.archive,
  );
  const copies = await mapsToPlace(folder, warn);
  let perfMaps: PerfMaps | undefined;
  let pltRenamed: Set<string> | undefined;
  let writer: ScriptTextWriter | undefined;
  let lastProgress = performance.now();
  let events = 0;
  // Loads ahead of symbol tables stop starting when the run ends, however it ends (or at Ctrl-C).
  const loadsAhead = new AbortController();
  const stopLoads = () => loadsAhead.abort();
  signal?.addEventListener('abort', stopLoads, { once: true });
  try {
    await readPerfDataFile(
      `${folder.path}/${layout.perfData}`,
      {
        async header(header) {
          perfMaps = new PerfMaps(folder, { copies, hostFiles: recordedHere(header) }, warn);
          const symbols = await builtinEngineSymbols(folder, header, perfMaps, warn, {
            demangle: !opts.perfScriptArgs.includes('--no-demangle'),
            signal: loadsAhead.signal,
          });
          pltRenamed = symbols.sources.pltRenamed;
          writer = new ScriptTextWriter(symbols, output, { pids, skipEvents: opts.skipEvents });
          await writer.header(header);
          await alongside?.header?.(header);
        },
        event(event) {
          // The clock is read at the first event and every 1024th after, not for each.
          if ((events++ & 1023) === 0 && performance.now() - lastProgress >= opts.progressIntervalMs) {
            lastProgress = performance.now();
            progress(`reading ${layout.perfData}: ${writer!.samples} samples`);
          }
          // No promise per event unless the writer has to wait (for a symbol table, for the file).
          const written = writer!.event(event);
          if (!alongside) return written;
          return written ? written.then(() => alongside.event(event)) : alongside.event(event);
        },
      },
      { signal, name: layout.perfData },
    );
    await output.finish();
    if (pltRenamed && pltRenamed.size > 0) warn(pltRenameWarning(pltRenamed));
    const unwound = writer && writer.unwound.samples > 0 ? writer.unwound : undefined;
    if (unwound) progress(unwoundNotice(unwound));
    return {
      fold: stackFolder.end(),
      resolver,
      header: parseRecordingHeader(output.headerLines()),
      scriptBytes: output.bytes,
      linesCut: output.linesCut,
      isolated: false,
      perfMaps: [],
      jitMaps: perfMaps?.used ?? [],
      pltRenamed: [...(pltRenamed ?? [])].sort(),
      keptBinaries: 0,
      unwound,
    };
  } catch (error) {
    output.destroy();
    throw error;
  } finally {
    stopLoads();
    signal?.removeEventListener('abort', stopLoads);
  }
}

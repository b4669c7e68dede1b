// `collect --symbols sampled|coreclr|all|none` as a collect step: after recording, before postprocess, fetch the
// debug files of the target's native libraries and place them in perf's build-id cache, so the postprocess's
// `perf script` names their frames. By default (sampled) libcoreclr.so and every native library perf sampled that
// is stripped (libc, libstdc++, libclrjit...), up to a number of libraries. The report goes to the manifest under
// `collect.steps.symbols`: which build-id was found where. Never fails the profile over a server: that is a status per
// library.
import { sampledFilesOf, type CollectStep, type StepContext, type StepReport } from '../step/step.js';
import { perfBuildIdDir } from '../perf/buildid-cache.js';
import { fetchTargetSymbols, type DebugSymbolsOptions, type LibrarySymbols } from './debug-symbols.js';
import { librarySelections, type LibrarySelection } from './library-selection.js';
import { defaultSymbolCacheDir } from './symbol-cache.js';
import type { SymbolServer } from './symbol-server.js';

export type SymbolsMode = LibrarySelection | 'none';

export const symbolsModes: readonly SymbolsMode[] = Object.freeze([...librarySelections, 'none']);

export interface SymbolsStepOptions {
  /**
   * sampled: libcoreclr.so and every native library perf sampled, when lacking symbols (default); coreclr:
   * libcoreclr.so of a .NET target; all: every mapped native library lacking symbols; none: skip.
   */
  mode: SymbolsMode;
  /** Libraries whose debug files are looked for in one run at most, libcoreclr.so first. Default 32. */
  maxLibraries?: number;
  /** From symbolServerList (flags, PROFCPU_SYMBOL_SERVERS, DEBUGINFOD_URLS, Microsoft's); empty when offline. */
  servers: readonly SymbolServer[];
  /** Default defaultSymbolCacheDir(env). */
  cacheDir?: string;
  /** Default: what perf uses (perfBuildIdDir). */
  buildIdDir?: string;
  /** Where /proc is mounted. Default `/proc`. */
  procRoot?: string;
  /** Environment for the defaults above. Default: none (so `~/.cache`). */
  env?: Readonly<Record<string, string | undefined>>;
  fetch?: DebugSymbolsOptions['fetch'];
}

export const symbolsStepDefaults = Object.freeze({
  mode: 'sampled' as SymbolsMode,
  // A .NET service samples a dozen native libraries or so (runtime, JIT, libc, libstdc++, ssl, z...): enough for
  // those, and a bound on the downloads (each under symbolFetchDefaults' size cap and deadline) when far more show up.
  maxLibraries: 32,
});

const mib = (n: number) => `${(n / (1 << 20)).toFixed(0)} MiB`;

export function symbolsStep(options: SymbolsStepOptions): CollectStep {
  const { mode } = options;
  return {
    name: 'symbols',
    async afterRecording(context: StepContext): Promise<StepReport> {
      if (mode === 'none') return { mode };
      if (mode === 'coreclr' && context.target.runtime !== 'dotnet') return { mode, state: 'not-dotnet' };
      const buildIdDir = options.buildIdDir ?? (await perfBuildIdDir({ signal: context.signal }));
      const sampled = mode === 'sampled' ? await sampledFilesOf(context) : undefined;
      const maxLibraries = options.maxLibraries ?? symbolsStepDefaults.maxLibraries;
      const report = await fetchTargetSymbols({
        pid: context.target.pid,
        procRoot: options.procRoot ?? context.procRoot,
        libraries: mode,
        ...(sampled && { sampled }),
        ...(context.files && { files: context.files }),
        // In a collect session, the libraries are read in its target reader: a read that never returns is its.
        ...(context.readTargetElf && { readElf: context.readTargetElf }),
        maxLibraries,
        servers: options.servers,
        cacheDir: options.cacheDir ?? defaultSymbolCacheDir(options.env ?? {}),
        buildIdDir,
        fetch: options.fetch,
        signal: context.signal,
        warn: context.warn,
        progress: (p) =>
          context.progress(`debug file ${p.buildId}: ${mib(p.received)}${p.total ? ` of ${mib(p.total)}` : ''}`),
      });
      for (const library of report.libraries) {
        if (library.status === 'placed') context.progress(`symbols for ${library.path} from ${library.source}`);
        // Expected for distro and source-built runtimes (not on Microsoft's server): said, not warned.
        else if (library.status === 'not-found')
          context.progress(`no debug file for ${library.path} (build-id ${library.buildId}) on any symbol server`);
      }
      const over = report.libraries.filter((l) => l.status === 'over-limit');
      if (over.length > 0) context.warn(overLimitMessage(over, maxLibraries, context.target.pid));
      return { mode, maxLibraries, ...report };
    },
  };
}

function overLimitMessage(over: readonly LibrarySymbols[], max: number, pid: number): string {
  const names = over.slice(0, 3).map((l) => l.path);
  const more = over.length > 3 ? ` and ${over.length - 3} more` : '';
  return (
    `debug files were looked for in the first ${max} libraries lacking symbols; not for ${names.join(', ')}${more} ` +
    `(fix: \`profcpu symbols --pid ${pid}\` fetches every mapped library's while the target runs, then ` +
    '`profcpu postprocess --dir <output folder>`)'
  );
}

/** What others read back from the symbols step's report (the summary's remedy for libraries left unnamed). */
export interface SymbolsStepFacts {
  mode?: string;
  servers?: string[];
  maxLibraries?: number;
  libraries?: { path: string; status: string; attempts?: { outcome: string }[] }[];
}

/** The symbols step's report, as written by symbolsStep above; `{}` when the step did not run. */
export function symbolsFacts(report: StepReport | undefined): SymbolsStepFacts {
  return (report as SymbolsStepFacts | undefined) ?? {};
}

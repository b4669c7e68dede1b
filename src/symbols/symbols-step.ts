// `collect --symbols coreclr|all|none` as a collect step: after recording, before postprocess, fetch the debug files
// of the target's native libraries (libcoreclr.so by default) and place them in perf's build-id cache, so the
// postprocess's `perf script` names their frames. The report goes to the manifest under `collect.steps.symbols`:
// which build-id was found where. Never fails the profile over a server: that is a status per library.
import type { CollectStep, StepContext, StepReport } from '../collect/steps.js';
import { perfBuildIdDir } from '../perf/buildid-cache.js';
import { fetchTargetSymbols, type DebugSymbolsOptions } from './debug-symbols.js';
import { defaultSymbolCacheDir } from './symbol-cache.js';
import type { SymbolServer } from './symbol-server.js';

export type SymbolsMode = 'coreclr' | 'all' | 'none';

export interface SymbolsStepOptions {
  /** coreclr: libcoreclr.so of a .NET target; all: every mapped native library lacking symbols; none: skip. */
  mode: SymbolsMode;
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

export const symbolsStepDefaults = Object.freeze({ mode: 'coreclr' as SymbolsMode });

const mib = (n: number) => `${(n / (1 << 20)).toFixed(0)} MiB`;

export function symbolsStep(options: SymbolsStepOptions): CollectStep {
  const { mode } = options;
  return {
    name: 'symbols',
    async afterRecording(context: StepContext): Promise<StepReport> {
      if (mode === 'none') return { mode };
      if (mode === 'coreclr' && context.target.runtime !== 'dotnet') return { mode, state: 'not-dotnet' };
      const buildIdDir = options.buildIdDir ?? (await perfBuildIdDir({ signal: context.signal }));
      const report = await fetchTargetSymbols({
        pid: context.target.pid,
        procRoot: options.procRoot ?? '/proc',
        libraries: mode,
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
      return { mode, ...report };
    },
  };
}

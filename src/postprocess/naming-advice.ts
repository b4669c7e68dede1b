// The naming-quality figures of a fold (and what the resolver read) in, the likely causes of unnamed frames with a
// remedy for each out, when fewer than 95% of samples have every frame named. Pure: collect prints the lines in its
// summary, postprocess keeps the advice in manifest.json.

import type { FolderResolver, NamingSources } from '../dotnet/naming/folder-resolver.js';
import { unloggedStubName, type ResolverStats } from '../dotnet/naming/resolver.js';
import type { FrameResolver } from '../stacks/frame-name.js';

/** Why DOTNET_PerfMapStubGranularity=2 (measured with .NET 10.0.12, see src/dotnet/perfmap/perfmap-session.ts). */
const stubGranularityWhy =
  'stubs are logged one by one rather than by 64 KiB block, which keeps .NET 10 from abandoning its jitdump ' +
  'and still names them';

/** The share of fully named samples below which profcpu warns. */
export const namingShareTarget = 0.95;

/** What the advice reads from the fold's figures (src/stacks/stack-table.ts NamingQuality). */
export interface NamingFigures {
  samples: number;
  fullyNamed: number;
  /** Fully named when unnamed frames inside libcoreclr.so are forgiven. */
  fullyNamedExceptCoreclr: number;
  /** Frames by kind over all samples. */
  framesByKind: Record<'jit' | 'readytorun' | 'native' | 'native-unnamed' | 'kernel' | 'unknown', number>;
}

export interface NamingAdviceContext {
  /**
   * False for a target that is not a .NET process: the perf-map causes are then not offered. Default: true, unless
   * `sources` says the target is another runtime and nothing .NET was read.
   */
  dotnet?: boolean;
  /** What the .NET resolver read from the output folder; undefined when there was no perf map nor jitdump. */
  sources?: NamingSources;
  /** How the resolver fared (over distinct frame lines). */
  resolver?: ResolverStats;
  /** How the runtime came to write its perf map: profcpu's EnablePerfMap over IPC, or the app's own environment. */
  perfMapEnabledBy?: 'ipc' | 'environment';
  /** Why collect read no stub table from the runtime's memory: its runtime-stubs step's reason, when it gave one. */
  runtimeStubsSkipped?: string | undefined;
  /** Unnamed frames lie in `memfd:doublemapper` mappings (.NET's JIT code under W^X). */
  memfdFrames?: boolean;
}

export interface NamingCause {
  cause: string;
  remedy: string;
}

export interface NamingAdvice {
  /** fullyNamed / samples. */
  share: number;
  /** Likely causes, the weightiest first. */
  causes: NamingCause[];
}

/** What every rule below looks at, worked out once. */
interface AdviceFacts {
  figures: NamingFigures;
  kinds: NamingFigures['framesByKind'];
  context: NamingAdviceContext;
  sources: NamingSources | undefined;
  /** The target is a .NET process (or nothing says otherwise). */
  dotnet: boolean;
  /** A .NET target with neither perf map nor jitdump: every managed frame is unnamed, whatever else is wrong. */
  noMaps: boolean;
  /** Forgiving libcoreclr.so's unnamed frames alone would reach the target share. */
  coreclrOnly: boolean;
}

/** A likely cause of unnamed frames, when the facts show it. */
type NamingRule = (facts: AdviceFacts) => NamingCause | undefined;

const noPerfMap: NamingRule = ({ noMaps, sources }) =>
  noMaps
    ? {
        cause: sources?.readyToRun
          ? 'the .NET runtime wrote no perf map nor jitdump, so JIT-compiled methods have no names (precompiled ' +
            'ReadyToRun methods are named from their images)'
          : 'the .NET runtime wrote no perf map nor jitdump, so JIT-compiled and ReadyToRun methods have no names',
        remedy:
          'Let profcpu enable the perf map over the diagnostic socket (.NET 8 or later; profcpu must reach ' +
          '/proc/<pid>/root/tmp/dotnet-diagnostic-*: share the PID namespace and run as root or as the app’s user), ' +
          'or start the app with DOTNET_PerfMapEnabled=1 DOTNET_PerfMapStubGranularity=2.',
      }
    : undefined;

const noReadyToRun: NamingRule = ({ noMaps, dotnet, sources, context }) => {
  if (noMaps || !dotnet || !sources || (sources.jitDump && sources.jitDump.readyToRun > 0) || sources.readyToRun)
    return undefined;
  const abandoned = sources.jitDump?.truncated === true && context.perfMapEnabledBy !== 'ipc';
  return {
    cause: abandoned
      ? 'the jitdump stops early (the runtime gives up on it when it cannot copy a stub block, which .NET 10 ' +
        'does at startup when DOTNET_PerfMapEnabled is set in its environment), so ReadyToRun (precompiled ' +
        'framework) methods have no names'
      : 'no ReadyToRun (precompiled framework) method is named: they are logged only to the jitdump, which is ' +
        (sources.jitDump ? 'empty of them' : 'missing'),
    remedy: abandoned
      ? `Add DOTNET_PerfMapStubGranularity=2 to the app’s environment (${stubGranularityWhy}); \`profcpu collect\` ` +
        'also re-opens an abandoned jitdump over the diagnostic socket (.NET 8 or later).'
      : 'Use DOTNET_PerfMapEnabled=1 (map and jitdump) rather than 3 (map only), or leave it unset and let ' +
        'profcpu enable both over the diagnostic socket.',
  };
};

const unloggedStubs: NamingRule = ({ noMaps, dotnet, context, sources }) => {
  const stubs = context.resolver?.unloggedStubs ?? 0;
  if (noMaps || !dotnet || stubs === 0) return undefined;
  const unlogged =
    `${stubs} distinct frame addresses lie in .NET runtime stubs the runtime never logged (shown as ` +
    `${unloggedStubName})`;
  if (sources?.runtimeStubs)
    // The table was read: what it misses was made after collect read it, or lies where it does not look.
    return {
      cause:
        `${unlogged} and outside the ${sources.runtimeStubs.ranges} stub ranges collect read from the runtime’s ` +
        'memory: stubs made after collect last read them, or kinds it does not find',
      remedy:
        'Nothing to set in the app: collect reads the runtime’s stubs before and after recording, so a longer ' +
        'warm-up before recording names more of them.',
    };
  // No table: the remedy depends on why (the step's reason, when collect ran it).
  const why = context.runtimeStubsSkipped;
  const refused = why === undefined || /memory of process|EACCES|EPERM/.test(why);
  const fromTheStart =
    'start the app with DOTNET_PerfMapEnabled=1 so the runtime logs its stubs from the start (`profcpu collect` ' +
    `re-opens the jitdump .NET 10 abandons at startup; or add DOTNET_PerfMapStubGranularity=2, with which ${stubGranularityWhy}); ` +
    'not DOTNET_PerfMapStubGranularity=4, which stops logging stubs altogether.';
  return {
    cause:
      `${unlogged}: it logs a stub only when it creates it, so the JIT’s write barriers, virtual-dispatch ` +
      'stubs and dynamic helpers created before the perf map was switched on have no name, and profcpu could not ' +
      'read their kinds from the runtime’s memory (' +
      (why === undefined
        ? 'collect’s runtime-stubs step says why: .NET older than 8, its version unknown, or no ptrace access to the target)'
        : `${why})`),
    remedy: refused
      ? 'Run collect with ptrace access to the target (root with CAP_SYS_PTRACE in the sidecar) so it reads the ' +
        `stubs from the runtime’s memory (.NET 8 and later). Only if that cannot be: ${fromTheStart}`
      : `To name them, ${fromTheStart}`,
  };
};

/** Addresses in no executable mapping: the unwinder followed a frame pointer into data or nowhere. */
const brokenChains: NamingRule = ({ noMaps, dotnet, kinds, sources, context }) => {
  const broken = context.resolver ? context.resolver.noMapping : kinds.unknown;
  if (noMaps || kinds.unknown === 0 || broken === 0) return undefined;
  const chains =
    'frame-pointer chains broken by native code built without frame pointers (`profcpu collect --unwind mixed` ' +
    'mends those, from a copy of each sample’s stack: a bigger perf.data)';
  // A recording made without collect's snapshots, of .NET under W^X: perf itself leaves its JIT frames unnamed.
  if (context.memfdFrames && !sources)
    return {
      cause:
        `${kinds.unknown} frames lie in no file nor perf map: JIT code .NET runs from a memfd:doublemapper ` +
        `mapping (its W^X default), which perf does not name from the perf map, or ${chains}`,
      remedy:
        'Record with `profcpu collect`, which names memfd:doublemapper frames from its snapshots, or start the ' +
        'app with DOTNET_EnableWriteXorExecute=0.',
    };
  return dotnet
    ? {
        cause: `frames outside any named code (${broken} distinct address${broken === 1 ? '' : 'es'}): mostly ${chains}`,
        remedy:
          'Nothing to set in the app for these; look for [unknown] frames under native callers in folded_stacks.out.',
      }
    : {
        cause: `${kinds.unknown} frames lie in no file nor perf map: JIT code without a perf map, or ${chains}`,
        remedy: 'Have the runtime write /tmp/perf-<pid>.map (Node: --perf-basic-prof; Java: perf-map-agent).',
      };
};

const coreclrDebugFile: NamingRule = ({ kinds, figures, coreclrOnly }) =>
  kinds['native-unnamed'] > 0 && figures.fullyNamedExceptCoreclr > figures.fullyNamed
    ? {
        cause: `frames inside libcoreclr.so (the runtime: GC, JIT helpers) have no names: its debug file is missing${
          coreclrOnly ? ', and that alone keeps the share below target' : ''
        }`,
        remedy:
          'Run `profcpu symbols --pid <pid> --libraries coreclr` while the app runs (fetches libcoreclr.so.dbg from ' +
          'the Microsoft symbol server into perf’s build-id cache), then `profcpu postprocess` again.',
      }
    : undefined;

/**
 * Other native libraries without names. The resolver saw every frame perf left unnamed: it says which native files
 * they were in (managed code in .dll and memfd mappings is covered by the rules above).
 */
const otherDebugFiles: NamingRule = ({ noMaps, kinds, coreclrOnly, context }) => {
  const nativeFiles = context.resolver
    ? Object.entries(context.resolver.unnamedByFile)
        .filter(([file]) => isNativeFile(file))
        .sort(([a, x], [b, y]) => y - x || (a < b ? -1 : a > b ? 1 : 0))
        .map(([file]) => file)
    : undefined;
  if (noMaps || kinds['native-unnamed'] === 0 || coreclrOnly || nativeFiles?.length === 0) return undefined;
  const which = nativeFiles
    ? `${nativeFiles.slice(0, 5).join(', ')}${nativeFiles.length > 5 ? ` and ${nativeFiles.length - 5} more` : ''}`
    : 'native libraries other than libcoreclr.so';
  return {
    // A file with a symbol table may still leave a frame unnamed (code between its symbols): the cause says what a
    // debug file would bring, not that the file is stripped.
    cause: `${which} ${nativeFiles?.length === 1 ? 'has' : 'have'} frames no symbol names (a stripped file whose debug file was not found, or code between its symbols)`,
    // Never "install the debug packages": in the target that changes the target, in the sidecar they rarely match the
    // target's distribution; a debuginfod of that distribution serves exactly its build-ids.
    remedy:
      'Run `profcpu symbols --pid <pid>` while the app runs, with a server that has them (`--symbol-server URL` or ' +
      'DEBUGINFOD_URLS: the debuginfod of the target’s distribution), then `profcpu postprocess` again; ' +
      '`profcpu collect` does this for the libraries it samples (--symbols sampled, the default).',
  };
};

/** The rules, in the order their causes are listed: the weightiest first. */
const namingRules: readonly NamingRule[] = [
  noPerfMap,
  noReadyToRun,
  unloggedStubs,
  brokenChains,
  coreclrDebugFile,
  otherDebugFiles,
];

/** Advice when fewer than 95% of samples are fully named; undefined when naming is good or there are no samples. */
export function namingAdvice(figures: NamingFigures, context: NamingAdviceContext = {}): NamingAdvice | undefined {
  if (figures.samples <= 0) return undefined;
  const share = figures.fullyNamed / figures.samples;
  if (share >= namingShareTarget) return undefined;
  const sources = context.sources;
  const dotnet =
    context.dotnet ??
    (sources === undefined ||
      sources.runtime === 'dotnet' ||
      sources.perfMap !== undefined ||
      sources.jitDump !== undefined);
  const facts: AdviceFacts = {
    figures,
    kinds: figures.framesByKind,
    context,
    sources,
    dotnet,
    noMaps: dotnet && (!sources || (!sources.perfMap && !sources.jitDump)),
    coreclrOnly: figures.fullyNamedExceptCoreclr / figures.samples >= namingShareTarget,
  };
  const causes = namingRules.map((rule) => rule(facts)).filter((c): c is NamingCause => c !== undefined);
  if (causes.length === 0)
    causes.push({
      cause: 'unnamed frames of no single kind',
      remedy: 'Look for `[dso]` frames in folded_stacks.out to see which mappings lack names.',
    });
  return { share, causes };
}

/** A file whose unnamed frames a debug file would name: not libcoreclr.so (its own cause), managed code or no file. */
function isNativeFile(file: string): boolean {
  if (file === 'libcoreclr.so' || file.startsWith('[') || file.startsWith('memfd:')) return false;
  return !/\.(dll|exe)$/i.test(file) && !/^perf-\d+\.map$/.test(file) && file !== '//anon';
}

/** The advice as warning lines: the figure first, then one line per cause with its remedy. */
export function formatNamingAdvice(advice: NamingAdvice): string[] {
  const percent = (x: number) => `${(100 * x).toFixed(1)}%`;
  return [
    `only ${percent(advice.share)} of samples have every frame named (target ${percent(namingShareTarget)}):`,
    ...advice.causes.map((c) => `- ${c.cause}. ${c.remedy}`),
  ];
}

/** What manifest.json says about naming: the fold's figures, what the .NET resolver read and did, and the advice. */
export type NamingReport<Q extends NamingFigures> = Q & {
  /** The perf map, jitdump and maps snapshots read, and the resolver's outcomes over distinct frame lines. */
  dotnet?: { sources: NamingSources; resolved: ResolverStats };
  /** Present when fewer than 95% of samples are fully named. */
  advice?: NamingAdvice;
};

/**
 * The naming report for a fold's figures and the resolver postprocess used (the one loadFolderResolver built, or
 * any other, or none: only loadFolderResolver's carries what it read). A target without one is taken for non-.NET.
 */
export function namingReport<Q extends NamingFigures>(
  quality: Q,
  resolver: FrameResolver | undefined,
  context: NamingAdviceContext = {},
): NamingReport<Q> {
  const folder = resolver && 'sources' in resolver ? (resolver as FolderResolver) : undefined;
  const advice = namingAdvice(quality, {
    dotnet: folder !== undefined || resolver !== undefined,
    sources: folder?.sources,
    resolver: folder?.stats,
    ...context,
  });
  return {
    ...quality,
    ...(folder ? { dotnet: { sources: folder.sources, resolved: { ...folder.stats } } } : {}),
    ...(advice ? { advice } : {}),
  };
}

// An output folder in, the .NET frame resolver for its target out: reads the snapshots collect took
// (`target/perf-<nspid>.map`, `target/jit-<nspid>.dump`, `target/maps`, `target/target.json`, see
// src/output/layout.ts), or, in a folder without them, the copies of one process's `perf-<pid>.map` and
// `jit-<pid>.dump` beside perf.data, and says what it found. This is the FrameResolverFactory postprocess takes.
// Missing or damaged files are warnings, not errors: perf script still names what it can without them.

import { join } from 'node:path';
import { layout } from '../../output/layout.js';
import { readTargetIds } from '../../output/target-info.js';
import { ignoreWarnings, type Warn } from '../../diagnostics.js';
import { isProfcpuError } from '../../error.js';
import type { CappedBytes } from '../../files/bounded-read.js';
import { OutputFolder } from '../../files/output-folder.js';
import { parseProcMaps, type ProcMapping } from '../../target/proc-maps.js';
import { SymbolTable } from '../../formats/jit/symbol-table.js';
import { readJitDump } from '../../formats/jit/jitdump.js';
import { readPerfMap } from '../../formats/jit/perfmap.js';
import { loadImageNames } from '../readytorun/readytorun-store.js';
import { createDotnetResolver, readyToRunTags, type DotnetResolver } from './resolver.js';
import { readRuntimeStubTable, StubRangeIndex } from '../runtime-stubs/runtime-stubs-store.js';

/** What was read from the folder, for the naming report and the benchmark. */
export interface NamingSources {
  /** Relative path of the perf map used, entries read, lines skipped, whether its last line was cut. */
  perfMap?: { file: string; symbols: number; skipped: number; truncated: boolean };
  /** Same for the jitdump; `readyToRun` counts entries tagged [PreJIT] or [PreJit-cold]. */
  jitDump?: { file: string; symbols: number; readyToRun: number; skipped: number; truncated: boolean };
  /** Name tables of ReadyToRun images read from target/readytorun: images and code blocks. */
  readyToRun?: { images: number; methods: number };
  /** The runtime's stub table read from its memory (target/runtime-stubs.json): ranges, runtime version. */
  runtimeStubs?: { file: string; ranges: number; runtimeVersion: string | undefined };
  /** Mappings read from target/maps. */
  procMaps?: { file: string; mappings: number; skipped: number };
  /** The target's pids from target.json (host pid, namespace pid). */
  pids: number[];
  /** target.json's `runtime` (`dotnet` for a .NET target), when it says. */
  runtime: string | undefined;
}

/** The resolver, with what it read attached (for manifest.json and the naming advice). */
export interface FolderResolver extends DotnetResolver {
  readonly sources: NamingSources;
}

/**
 * Reads the folder's snapshots. Without a perf map or jitdump: for a .NET target (target.json says so) a resolver
 * that names nothing but carries `sources` for the naming advice, after a warning; otherwise undefined. Its signature
 * is postprocess's FrameResolverFactory.
 */
export async function loadFolderResolver(
  dir: string,
  warn: Warn = ignoreWarnings,
): Promise<FolderResolver | undefined> {
  // The folder may have come from anybody: its files are read without following links, each up to a cap.
  const folder = await OutputFolder.open(dir);
  try {
    return await resolverFromSnapshots(folder, warn);
  } finally {
    await folder.close();
  }
}

/**
 * Bytes read from a folder's snapshots at most (1 GiB each). Above what collect writes (--snapshot-limit, 256 MiB by
 * default) so a raised limit still post-processes; a received folder cannot make postprocess read more.
 */
export const folderReadLimits = Object.freeze({
  snapshotBytes: 1024 ** 3,
  procMapsBytes: 64 << 20,
  timeoutMs: 60_000,
});

async function readCapped(folder: OutputFolder, file: string, maxBytes: number, warn: Warn): Promise<CappedBytes> {
  const read = await folder.read(file, { maxBytes, timeoutMs: folderReadLimits.timeoutMs });
  if (read.truncated) warn(`${file} is larger than ${maxBytes} bytes: only its first ${maxBytes} bytes are used`);
  return read;
}

async function resolverFromSnapshots(folder: OutputFolder, warn: Warn): Promise<FolderResolver | undefined> {
  const { sources, pick } = await snapshotsOf(folder);
  const perfMapFile = pick(layout.perfMap, /^perf-\d+\.map$/);
  const symbols = (perfMapFile && (await readPerfMapSnapshot(folder, perfMapFile, sources, warn))) || new SymbolTable();
  const jitDumpFile = pick(layout.jitDump, /^jit-\d+\.dump$/);
  if (jitDumpFile) await addJitDump(folder, jitDumpFile, symbols, sources, warn);
  const assemblies = await loadImageNames(folder, warn);
  if (assemblies.length > 0)
    sources.readyToRun = {
      images: assemblies.length,
      methods: assemblies.reduce((n, a) => n + a.entry.methods, 0),
    };
  const stubs = await readStubRanges(folder, sources, warn);

  if (!sources.perfMap && !sources.jitDump && assemblies.length === 0 && !stubs) {
    if (sources.runtime !== 'dotnet') return undefined;
    warn(
      `no perf map or jitdump in ${join(folder.path, layout.targetDir)}: .NET frames are left to perf, which cannot ` +
        'name JIT code under W^X nor any ReadyToRun code',
    );
    return Object.assign(createDotnetResolver({ symbols: [], mappings: [] }), { sources });
  }
  const mappings = await readMapsSnapshot(folder, sources, warn);
  return Object.assign(createDotnetResolver({ symbols, mappings, pids: sources.pids, assemblies, stubs }), {
    sources,
  });
}

/** The folder's target (its pids and runtime, for `sources`) and which of its snapshot files is the target's. */
async function snapshotsOf(folder: OutputFolder): Promise<{
  sources: NamingSources;
  pick: (fileOf: (nspid: number) => string, pattern: RegExp) => string | undefined;
}> {
  const ids = await readTargetIds(folder);
  const names = await folder.list(layout.targetDir);
  const beside = (await folder.list('.')).filter((name) => /^(perf-\d+\.map|jit-\d+\.dump)$/.test(name));
  // Copies beside perf.data (a recording made by hand, its /tmp files copied next to it) are named by the PID perf
  // recorded: the resolver takes one process, that of the only PID they name, when the folder has no snapshot.
  const besidePids = [...new Set(beside.map((name) => Number(/\d+/.exec(name)![0])))];
  const besidePid = besidePids.length === 1 ? besidePids[0] : undefined;
  const pick = (fileOf: (nspid: number) => string, pattern: RegExp): string | undefined => {
    if (ids?.nspid !== undefined) {
      const file = fileOf(ids.nspid);
      if (names.includes(file.slice(layout.targetDir.length + 1))) return file;
    }
    // Without target.json, the one snapshot there is (the folder holds a single target).
    const found = names.filter((n) => pattern.test(n)).sort();
    if (found.length === 1) return `${layout.targetDir}/${found[0]!}`;
    if (ids || besidePid === undefined) return undefined;
    const copy = fileOf(besidePid).slice(layout.targetDir.length + 1);
    return beside.includes(copy) ? copy : undefined;
  };
  const sources: NamingSources = {
    pids: ids ? [...new Set([ids.pid, ids.nspid])] : besidePid !== undefined ? [besidePid] : [],
    runtime: ids?.runtime,
  };
  return { sources, pick };
}

/** The perf map's entries, or undefined (with a warning) when the file cannot be read. */
async function readPerfMapSnapshot(
  folder: OutputFolder,
  file: string,
  sources: NamingSources,
  warn: Warn,
): Promise<SymbolTable | undefined> {
  const read = await readCapped(folder, file, folderReadLimits.snapshotBytes, warn).catch((error: unknown) => {
    warn(`could not read ${file} (${describe(error)}): JIT frames are named from the jitdump only`);
    return undefined;
  });
  if (read === undefined) return undefined;
  // Bytes, not a string: the table keeps them for the names (a million entries are ~150 MB).
  const parsed = readPerfMap(read.bytes);
  sources.perfMap = { file, symbols: parsed.symbols.length, ...pickCounts(parsed) };
  if (parsed.skipped > 0) warn(`${file}: ${parsed.skipped} lines were not perf-map entries and were skipped`);
  return parsed.symbols;
}

/** Adds to `symbols` what the jitdump holds and the perf map lacks; a jitdump that cannot be used is warned of. */
async function addJitDump(
  folder: OutputFolder,
  file: string,
  symbols: SymbolTable,
  sources: NamingSources,
  warn: Warn,
): Promise<void> {
  try {
    const { bytes } = await readCapped(folder, file, folderReadLimits.snapshotBytes, warn);
    const parsed = readJitDump(bytes, file);
    // The runtime writes every JIT-compiled method and stub to both files, in the same order; only ReadyToRun
    // methods are in the jitdump alone. Appending the jitdump's copies would put old entries (say a 64 KiB stub
    // block) after newer, finer ones of the perf map and hide them: only what the perf map lacks (the same start,
    // size and name) is added, its names copied so that the file's bytes can go.
    symbols.appendMissing(parsed.symbols);
    sources.jitDump = {
      file,
      symbols: parsed.symbols.length,
      readyToRun: parsed.symbols.countNamesEndingWith(readyToRunTags),
      ...pickCounts(parsed),
    };
    if (parsed.skipped > 0) warn(`${file}: ${parsed.skipped} records could not be read and were skipped`);
  } catch (error) {
    warn(`could not use ${file} (${describe(error)}): ` + 'ReadyToRun frames stay unnamed');
  }
}

/** The runtime's stub ranges the folder keeps, indexed, or undefined when it keeps none. */
async function readStubRanges(
  folder: OutputFolder,
  sources: NamingSources,
  warn: Warn,
): Promise<StubRangeIndex | undefined> {
  const stubTable = await readRuntimeStubTable(folder, warn);
  if (stubTable)
    sources.runtimeStubs = {
      file: layout.runtimeStubs,
      ranges: stubTable.ranges.length,
      runtimeVersion: stubTable.runtimeVersion,
    };
  return stubTable && stubTable.ranges.length > 0 ? new StubRangeIndex(stubTable.ranges) : undefined;
}

/** The target's mappings from the folder's maps snapshot; none (with a warning) without one. */
async function readMapsSnapshot(
  folder: OutputFolder,
  sources: NamingSources,
  warn: Warn,
): Promise<readonly ProcMapping[]> {
  const mapsText = await readCapped(folder, layout.procMaps, folderReadLimits.procMapsBytes, warn).then(
    (read) => read.bytes.toString('utf8'),
    () => undefined,
  );
  if (mapsText === undefined) {
    warn(
      `no ${layout.procMaps} snapshot: frames in memfd:doublemapper and .dll mappings cannot be placed, only ` +
        'anonymous JIT code is named',
    );
    return [];
  }
  const parsed = parseProcMaps(mapsText);
  sources.procMaps = { file: layout.procMaps, mappings: parsed.mappings.length, skipped: parsed.skipped };
  return parsed.mappings;
}

function pickCounts(parsed: { skipped: number; truncated: boolean }): { skipped: number; truncated: boolean } {
  return { skipped: parsed.skipped, truncated: parsed.truncated };
}

function describe(error: unknown): string {
  if (isProfcpuError(error)) return error.message;
  return (error as NodeJS.ErrnoException).code ?? String(error);
}

// A target process (or some ELF files) in; for each native library that lacks symbols, its debug file fetched by
// build-id, verified, and placed in perf's build-id cache out, with a report of which build-id was found where
// (for manifest.json). Which libraries: library-selection.ts. The target's files are read through /proc/PID/root,
// so nothing is added to the target and nothing needs to run inside it. A debug file perf's cache holds already is
// not fetched again; past `maxLibraries` nothing is fetched. Server trouble never throws: it is a status and a reason
// per library.
import { basename, resolve } from 'node:path';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import type { SampledFile } from '../perf/buildid-cache.js';
import { placeDebugFile, placedDebugFile } from './debug-placement.js';
import { isExecutable, parseProcMaps } from '../target/proc-maps.js';
import { readProcText } from '../target/procfs.js';
import { TargetFiles } from '../target/target-files.js';
import { readElfAt, readElfFile, type ElfInfo } from '../formats/elf/elf.js';
import { selectLibraries, type LibrarySelection } from './library-selection.js';
import {
  SymbolFetcher,
  type SymbolFetchAttempt,
  type SymbolFetchOptions,
  type SymbolFetchResult,
  type SymbolFetchProgress,
} from './symbol-server-fetch.js';
import { microsoftSymbolServer, type SymbolServer } from './symbol-server.js';

export type LibrarySymbolsStatus =
  /** The file has .symtab or DWARF already: nothing to fetch. */
  | 'has-symbols'
  /** The file has no GNU build-id note: no server can be asked. */
  | 'no-build-id'
  /** The file could not be read (vanished, permission, malformed). */
  | 'unreadable'
  /** The debug file is in perf's build-id cache. */
  | 'placed'
  /** perf's build-id cache held the debug file already: nothing fetched. */
  | 'present'
  /** Not fetched: more libraries needed debug files than `maxLibraries`. */
  | 'over-limit'
  | 'not-found'
  | 'failed'
  /** No server to ask and not in profcpu's cache. */
  | 'offline';

export interface LibrarySymbols {
  /** The path as the target sees it (or as given with --file). */
  path: string;
  buildId?: string;
  status: LibrarySymbolsStatus;
  /** `cache` or the server URL it was downloaded from. */
  source?: string;
  /** The verified debug file in profcpu's cache. */
  debugFile?: string;
  /** The `debug` file in perf's build-id cache. */
  placedAt?: string;
  reason?: string;
  attempts?: SymbolFetchAttempt[];
}

export interface SymbolsReport {
  servers: string[];
  cacheDir: string;
  buildIdDir: string;
  libraries: LibrarySymbols[];
}

export interface DebugSymbolsOptions {
  /** Servers in order (symbolServerList); empty: offline, cache only. */
  servers: readonly SymbolServer[];
  /** profcpu's symbol cache (defaultSymbolCacheDir). */
  cacheDir: string;
  /** perf's build-id cache (perfBuildIdDir). */
  buildIdDir: string;
  /** Timeouts, retries, size cap...: symbolFetchDefaults unless given. */
  fetch?: Partial<Omit<SymbolFetchOptions, 'servers' | 'cacheDir' | 'signal' | 'warn' | 'progress'>>;
  /** Libraries handled at once. Default 4. */
  concurrency?: number;
  /** Libraries whose debug files are asked of the servers (or the cache) at most, in file order. Default: no limit. */
  maxLibraries?: number;
  signal?: AbortSignal | undefined;
  warn?: Warn | undefined;
  progress?: ((p: SymbolFetchProgress) => void) | undefined;
}

export interface TargetSymbolsOptions extends DebugSymbolsOptions {
  /** The target as this process sees it (host PID, or the target's PID in a sidecar sharing its namespace). */
  pid: number;
  /** Where /proc is mounted. Default `/proc`. */
  procRoot?: string;
  /** sampled: libcoreclr.so and the files perf sampled; coreclr: libcoreclr.so only; all: every mapped library. */
  libraries: LibrarySelection;
  /** With `sampled`: the files perf sampled (sampledFiles). */
  sampled?: readonly SampledFile[];
  /**
   * The target's file system, opened already (collect's, which still reads it after the target exited); it stays
   * open. Default: opened here, and closed after.
   */
  files?: TargetFiles;
  /**
   * Reads a library's ELF facts by its path in the target (collect's target reader, src/collect/target-reader.ts).
   * Default: read here through `files`.
   */
  readElf?: (path: string) => Promise<ElfInfo>;
}

/** Symbols for the native libraries mapped by a running process. */
export async function fetchTargetSymbols(options: TargetSymbolsOptions): Promise<SymbolsReport> {
  const procRoot = options.procRoot ?? '/proc';
  const notVisible = (cause?: unknown) =>
    new ProfcpuError('TARGET_NOT_VISIBLE', `cannot read ${procRoot}/${options.pid}/maps`, {
      remedy: 'Check the PID, and run as root (or the target’s user) in a PID namespace that shows the target.',
      cause,
    });
  let mapsText: string | undefined;
  let mapsError: unknown;
  try {
    mapsText = await readProcText(options.pid, 'maps', { procRoot });
  } catch (cause) {
    mapsError = cause;
  }
  // The files perf sampled are known without the maps (the target may have exited since): only libcoreclr.so is
  // looked for there then.
  if (mapsText === undefined && options.libraries !== 'sampled') throw notVisible(mapsError);
  const mapped = parseProcMaps(mapsText ?? '')
    .mappings.filter(isExecutable)
    .map((m) => m.path);
  const wanted = selectLibraries(options.libraries, { mapped, sampled: options.sampled ?? [] });
  // The libraries are read inside the target's root: a link in its file system never leads to one of ours.
  const targetFiles = options.readElf
    ? undefined
    : (options.files ??
      (await TargetFiles.open(options.pid, { procRoot, signal: options.signal }).catch((cause) => {
        throw notVisible(cause);
      })));
  const read = options.readElf ?? ((path: string) => readTargetElf(targetFiles!, path));
  const files = wanted.map(({ path, buildId }) => ({ path, read: () => read(path), ...(buildId && { buildId }) }));
  const report = await symbolsFor(files, options).finally(() =>
    options.files || !targetFiles ? undefined : targetFiles.close(),
  );
  // Executable mappings of files that are not ELF (.NET maps its PE assemblies executable) are no native library.
  report.libraries = report.libraries.filter((l) => !(l.status === 'unreadable' && l.reason?.includes('no ELF magic')));
  return report;
}

/** The ELF facts of a file of the target's, by its path there; ProfcpuErrors (IO) when it cannot be read. */
export async function readTargetElf(files: TargetFiles, path: string): Promise<ElfInfo> {
  const handle = await files.lookup(path, 'file').catch((error: unknown) => {
    throw new ProfcpuError('IO', `cannot open ${path}: ${error instanceof Error ? error.message : String(error)}`);
  });
  try {
    return await readElfAt(handle, path);
  } finally {
    await handle.close();
  }
}

/** Symbols for ELF files named directly (`profcpu symbols --file`). */
export async function fetchFileSymbols(files: readonly string[], options: DebugSymbolsOptions): Promise<SymbolsReport> {
  return symbolsFor(
    files.map((file) => ({ path: resolve(file), read: () => readElfFile(file, resolve(file)) })),
    options,
  );
}

/** Libraries .NET ships (the runtime, the JIT, its native shims and hosts): Microsoft's server has their files. */
export function isDotnetLibrary(path: string): boolean {
  const name = basename(path);
  return (
    /^lib(coreclr|clrjit|clrgc|clrgcexp|mscordaccore|mscordbi|hostfxr|hostpolicy|coreclrtraceptprovider)\.so$/.test(
      name,
    ) ||
    /^libSystem\.[A-Za-z.]+\.so$/.test(name) ||
    path.includes('/Microsoft.NETCore.App/')
  );
}

/** A library: its path as reported, how to read its ELF facts, and the build-id perf recorded for it if known. */
interface LibraryFile {
  path: string;
  read: () => Promise<ElfInfo>;
  buildId?: string;
}

async function symbolsFor(files: readonly LibraryFile[], options: DebugSymbolsOptions): Promise<SymbolsReport> {
  const warn = options.warn ?? ignoreWarnings;
  const limit = Math.max(1, options.concurrency ?? 4);
  const fetcherFor = (servers: readonly SymbolServer[]) =>
    new SymbolFetcher({
      ...options.fetch,
      servers,
      cacheDir: options.cacheDir,
      signal: options.signal,
      warn,
      progress: options.progress,
    });
  const fetcher = fetcherFor(options.servers);
  // Microsoft's symbol server holds the files .NET ships (libcoreclr.so, libclrjit.so...), not a distribution's libc:
  // other libraries are asked of the other servers only (debuginfod, a symbol store of one's own), and when there is
  // none, of nobody (no doomed request, no warning), which the report says with the fix.
  const systemServers = options.servers.filter((s) => s.url !== microsoftSymbolServer);
  const systemFetcher = fetcherFor(systemServers);
  const shippedWithDotnet = new Set(files.filter((f) => isDotnetLibrary(f.path)).map((f) => f.path));
  // Three passes, so the report does not depend on which download ends first: read every file (and look in perf's
  // cache), fetch each build-id once, then place in file order (libraries sharing a build-id share perf's entry,
  // named after the first).
  const examined = await mapLimit(files, limit, (file) => examine(file, options.buildIdDir));
  const needed = [...new Set(examined.flatMap((e) => (e.status === undefined ? [e.buildId!] : [])))];
  const max = options.maxLibraries ?? Infinity;
  const wanted = needed.slice(0, max);
  const dotnetIds = new Set(examined.flatMap((e) => (shippedWithDotnet.has(e.path) && e.buildId ? [e.buildId] : [])));
  const fetchOne = async (id: string): Promise<SymbolFetchResult> => {
    if (dotnetIds.has(id) || systemServers.length === options.servers.length) return fetcher.fetch(id);
    const result = await systemFetcher.fetch(id);
    if (result.status !== 'offline' || options.servers.length === 0) return result;
    const reason =
      'not a .NET library and no debuginfod server is set (DEBUGINFOD_URLS, or --symbol-server debuginfod:URL ' +
      'with the target distribution’s, e.g. https://debuginfod.debian.net)';
    return {
      ...result,
      status: 'not-found',
      attempts: [{ server: 'debuginfod', url: '', outcome: 'skipped', reason }],
    };
  };
  const fetched = new Map(await mapLimit(wanted, limit, async (id) => [id, await fetchOne(id)] as const));
  const libraries: LibrarySymbols[] = [];
  for (const entry of examined) {
    if (entry.status !== undefined) libraries.push(entry as LibrarySymbols);
    else if (!fetched.has(entry.buildId!))
      libraries.push({
        path: entry.path,
        buildId: entry.buildId!,
        status: 'over-limit',
        reason: `${needed.length} libraries need debug files; only the first ${max} were looked for`,
      });
    else libraries.push(await place(entry.path, fetched.get(entry.buildId!)!, options));
  }
  return {
    servers: options.servers.map((s) => `${s.kind}:${s.url}`),
    cacheDir: options.cacheDir,
    buildIdDir: options.buildIdDir,
    libraries,
  };
}

async function mapLimit<T, R>(items: readonly T[], limit: number, f: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < items.length; i = next++) out[i] = await f(items[i]!);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}

/** The library's ELF facts; `status` stays unset when its debug file must be fetched. */
async function examine(file: LibraryFile, buildIdDir: string): Promise<Partial<LibrarySymbols> & { path: string }> {
  const { path } = file;
  let elf;
  try {
    // Named in reasons as the report names it (the resolved --file path, the target's own path), not as opened.
    elf = await file.read();
  } catch (error) {
    if (!isProfcpuError(error)) throw error;
    return { path, status: 'unreadable', reason: error.message };
  }
  const buildId = elf.buildId;
  if (!buildId) return { path, status: 'no-build-id' };
  // The file changed since perf recorded it: its symbols would not be those of the samples.
  if (file.buildId !== undefined && buildId !== file.buildId)
    return { path, buildId, status: 'unreadable', reason: `its build-id is now ${buildId}, not ${file.buildId}` };
  if (elf.hasSymtab || elf.hasDebugInfo) return { path, buildId, status: 'has-symbols' };
  const placedAt = await placedDebugFile(buildIdDir, buildId);
  if (placedAt) return { path, buildId, status: 'present', placedAt };
  return { path, buildId };
}

async function place(path: string, fetched: SymbolFetchResult, options: DebugSymbolsOptions): Promise<LibrarySymbols> {
  const buildId = fetched.buildId;
  const attempts = fetched.attempts.length > 0 ? { attempts: fetched.attempts } : {};
  if (!fetched.path) {
    const reason = fetched.attempts.map((a) => `${a.server}: ${a.reason ?? a.outcome}`).join('; ');
    return {
      path,
      buildId,
      status: fetched.status as LibrarySymbolsStatus,
      ...(reason ? { reason } : {}),
      ...attempts,
    };
  }
  const source = fetched.status === 'cached' ? 'cache' : fetched.server!;
  try {
    const placed = await placeDebugFile({
      buildIdDir: options.buildIdDir,
      buildId,
      debugFile: fetched.path,
      dsoPath: path,
    });
    return { path, buildId, status: 'placed', source, debugFile: fetched.path, placedAt: placed.path, ...attempts };
  } catch (error) {
    if (!isProfcpuError(error) || error.code === 'ABORTED') throw error;
    (options.warn ?? ignoreWarnings)(`${path}: ${error.message}`);
    return { path, buildId, status: 'failed', source, debugFile: fetched.path, reason: error.message, ...attempts };
  }
}

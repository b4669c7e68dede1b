// Names for the built-in engine (src/engine/script-text.ts), from what an output folder holds and what perf itself
// would read: kernel addresses from the folder's kallsyms snapshot (target/kallsyms), else from this machine's
// /proc/kallsyms when the recording's kernel is the running one (same build-id), else from the copy perf record kept in
// this machine's build-id cache (~/.debug/[kernel.kallsyms]/<build-id>/kallsyms), as perf does, and moved to where
// the recording's kernel had them when that text is of another boot (perf's kallsyms delta); file mappings from the
// symbol tables of the binaries the folder keeps (target/binaries/<build-id>), else of the file at the recorded path
// when its build-id is the recorded one (or none was recorded), else of the copy perf record left in this machine's
// build-id cache (~/.debug/.build-id/<xx>/<rest>/elf, its debug file beside it); anonymous code from the process's
// perf map (src/jit/jit-maps.ts); [vdso] frames from the vdso image perf would read (vdsoTable). Every file is read within limits;
// a file that cannot be read names nothing. perf.data may come from anybody (a prof.tar.gz sent): a path it names is
// opened only when it is a regular file (a device's open has effects: /dev/watchdog), and this machine's files (at
// recorded paths, in its build-id cache) are read only when perf.data was recorded on this machine (its hostname).
// The tables of the files perf.data lists start loading with the kernel's, before the first frame asks for them.
import { readFileSync } from 'node:fs';
import { readFile, type FileHandle } from 'node:fs/promises';
import { homedir, hostname } from 'node:os';
import { dirname, join } from 'node:path';
import type { Warn } from '../diagnostics.js';
import { layout } from '../output/layout.js';
import { openMachineFile, readMachineFile } from '../files/machine-files.js';
import type { OutputFolder } from '../files/output-folder.js';
import type { PerfDataHeader } from './perf-data/reader.js';
import type { Mapping, ScriptSymbols, SymbolHit, UnwindFile } from './script-text.js';
import { readKeptIndex, type KeptBinary } from '../binaries/kept-binaries.js';
import { bytesSource, fileByteSource, isBuildId, readElf, type ByteSource, type ElfInfo } from '../formats/elf/elf.js';
import { pltSecRange, readFunctionTable, type PltRules } from '../formats/elf/elf-functions.js';
import { lookupTable, type FunctionTable } from '../formats/function-table.js';
import { versionAtLeast } from '../perf/version.js';
import type { DemangleForm } from '../formats/elf/demangle.js';
import { kallsymsDelta, kallsymsTable } from '../formats/kallsyms.js';
import type { PerfMaps } from '../jit/jit-maps.js';
import { maxVdsoBytes, ownVdso } from '../kernel/vdso.js';
import { readCallFrameInfoByOffset } from '../formats/elf/eh-frame.js';

/**
 * CFI held for unwinding at most, over all files (libcoreclr.so's is ~1.5 MB, node's 3 MB; a forged recording may map
 * a thousand files of 64 MiB each): past it, a walk ends at frames in further files, and that is told.
 */
export const cfiLimits = Object.freeze({ totalBytes: 512 << 20 });

function cfiFullWarning(path: string): string {
  return (
    `unwinding: past ${cfiLimits.totalBytes >> 20} MiB of call frame information held, ${path} and the files after ` +
    'it are not read: a walk ends at their frames'
  );
}

const maxKallsymsBytes = 64 << 20;

/**
 * The files whose tables load before a frame asks: the first `files` of perf.data's build-id table (a forged one may
 * list a million), `parallel` at a time (each read is a few MB; more would only queue on the same disk and cores).
 */
export const prefetchLimits = Object.freeze({ files: 64, parallel: 2 });

export interface BuiltinSymbolSources {
  /** Where the kernel's symbols are read (`target/kallsyms`, `/proc/kallsyms`, the build-id cache's copy), if anywhere. */
  kernel: string | undefined;
  /**
   * Files whose calls through `.plt.sec` were named `<target>@plt`, as perf 6.3 and later name them, in a recording by
   * a perf that names them wrongly (see pltSecRange): a frame looked up there so far.
   */
  pltRenamed: Set<string>;
}

/** A file's table, with the PLT range perf 6.1 names wrongly when its entries were named as perf 6.12 names them. */
type FileTable = FunctionTable & { ibtPlt?: { start: bigint; end: bigint } };
/** The table of a file with a `.plt.sec`, for plt-rename.ts. */
export type IbtPltTable = FileTable & Required<Pick<FileTable, 'ibtPlt'>>;
/** How a file's symbols are named; `pltSecOnly`: only a file with a `.plt.sec` is read (the others give none). */
interface Naming {
  demangle: DemangleForm | false;
  plt: PltRules;
  byBuildIdOnly?: boolean;
  pltSecOnly?: boolean;
}

/**
 * perf.data was recorded on this machine (its hostname): only then are this machine's files (at recorded paths, in
 * its build-id cache, in /tmp) the recording's. Files of another machine at the same paths are other files; and a
 * sent perf.data must not make this machine's files (their symbol names) part of the outputs.
 */
export function recordedHere(header: PerfDataHeader): boolean {
  return header.features.hostname === hostname();
}

export async function builtinEngineSymbols(
  folder: OutputFolder,
  header: PerfDataHeader,
  perfMaps: PerfMaps | undefined,
  warn: Warn,
  { demangle = true, signal }: { demangle?: boolean; signal?: AbortSignal } = {},
): Promise<ScriptSymbols & { sources: BuiltinSymbolSources }> {
  const buildIds = recordedBuildIds(header);
  // The kernel's table loads while the kept index is read and the files' tables start loading (below).
  const kernelLoad = kernelText(folder, buildIds.get('[kernel.kallsyms]'), warn);
  kernelLoad.catch(() => {});
  const kept = await readKeptIndex(folder).catch(() => new Map<string, KeptBinary>());
  const naming = recordingNaming(header.features.perfVersion, demangle);
  const files = new FileTables(folder, perfMaps, buildIds, kept, recordedHere(header), naming, warn);
  files.loadAhead(header, signal);
  const kernel = new KernelSymbols(await kernelLoad, naming.plt, warn);
  return {
    sources: { kernel: kernel.source, pltRenamed: files.pltRenamed },
    kernel: (address) => kernel.lookup(address),
    kernelReference: (given) => kernel.reference(given),
    file: (mapping, offset) => files.lookup(mapping, offset),
    unwindRows: (mapping) => files.unwindRows(mapping),
  };
}

/** The build-ids perf.data lists, by file name. */
function recordedBuildIds(header: PerfDataHeader): Map<string, string> {
  const buildIds = new Map<string, string>();
  // An entry with an empty build-id (perf record -z writes them so) says nothing: perf reads such a file unchecked.
  for (const entry of header.features.buildIds) if (entry.buildId !== '') buildIds.set(entry.filename, entry.buildId);
  return buildIds;
}

/** Names as the perf that recorded (perf `version`) would give them. */
function recordingNaming(version: string | undefined, demangle: boolean): Naming {
  // PLT entries as the perf that recorded would name them.
  const plt: PltRules = versionAtLeast(version ?? '', 6, 2) ? '6.12' : '6.1';
  // C++ names as the perf that recorded would print them (demangle.ts): parameters and all from perf 6.4 on.
  const demangleAs: DemangleForm | false = !demangle ? false : versionAtLeast(version ?? '', 6, 4) ? 'full' : 'perf6.1';
  return { demangle: demangleAs, plt };
}

/** The symbol tables of the files frames lie in, each loaded once, on first ask or ahead. */
class FileTables {
  /** Files whose `.plt.sec` a frame was looked up in (BuiltinSymbolSources.pltRenamed). */
  readonly pltRenamed = new Set<string>();
  private readonly tables = new Map<string, Promise<FileTable>>();
  /** The tables loaded, by mapping, for the frames that follow. */
  private readonly loaded = new Map<string, FileTable>();
  private vdso: Promise<FunctionTable> | undefined;
  /** The files' CFI, loading and loaded (RowsAtOffset), and the bytes held over all of them. */
  private readonly cfi = new Map<string, Promise<UnwindFile | undefined>>();
  private readonly cfiLoaded = new Map<string, UnwindFile | undefined>();
  private cfiBytes = 0;
  private cfiFull = false;
  /**
   * A recording without build-ids (perf record -B: the target mapped files from a FUSE or network file system)
   * names none: a file collect kept is known by its path then, with the build-id collect read from it, rather than
   * named from whatever file has that path here. A path kept under two build-ids says nothing.
   */
  private readonly keptByPath = new Map<string, string | undefined>();

  constructor(
    private readonly folder: OutputFolder,
    private readonly perfMaps: PerfMaps | undefined,
    private readonly buildIds: Map<string, string>,
    private readonly kept: Map<string, KeptBinary>,
    private readonly hostFiles: boolean,
    private readonly naming: Naming,
    private readonly warn: Warn,
  ) {
    for (const { path, buildId } of kept.values())
      this.keptByPath.set(path, this.keptByPath.has(path) ? undefined : buildId);
  }

  /**
   * How to unwind code in the file mapped as `mapping`, by file offset: its CFI, read where its symbols are (the kept
   * copy, this machine's file, perf's build-id cache; the vdso image), and where .NET's code lies in it (UnwindFile);
   * undefined when the file cannot be read (then script-text.ts decides by its name), and for every file after
   * cfiLimits.totalBytes of CFI are held (then told once).
   */
  unwindRows(mapping: Mapping): UnwindFile | undefined | Promise<UnwindFile | undefined> {
    const buildId =
      mapping.dso === '[vdso]'
        ? (mapping.buildId ?? this.buildIds.get('[vdso]'))
        : (mapping.buildId ?? this.buildIds.get(mapping.path) ?? this.keptByPath.get(mapping.path));
    const key = `${buildId ?? ''}\0${mapping.dso}`;
    if (this.cfiLoaded.has(key)) return this.cfiLoaded.get(key);
    let rows = this.cfi.get(key);
    if (!rows) {
      // Never rejected: a file that cannot be read unwinds as one without CFI (a rejection here would be asked again).
      rows = this.loadRows(mapping, buildId)
        .catch(() => undefined)
        .then((loaded) => {
          this.cfiLoaded.set(key, loaded);
          return loaded;
        });
      this.cfi.set(key, rows);
    }
    return rows;
  }

  private async loadRows(mapping: Mapping, buildId: string | undefined): Promise<UnwindFile | undefined> {
    if (this.cfiBytes >= cfiLimits.totalBytes) {
      if (!this.cfiFull) this.warn(cfiFullWarning(mapping.path));
      this.cfiFull = true;
      return undefined;
    }
    const read = async (source: ByteSource): Promise<UnwindFile> => {
      try {
        const { info, rowAtOffset, loaded } = await readCallFrameInfoByOffset(source, mapping.path, {
          warn: this.warn,
        });
        this.cfiBytes += info.bytes;
        // Past its PT_LOAD segments, a file holds no ELF code: a single-file .NET app's bundled images.
        return { rowAt: info.entries > 0 ? rowAtOffset : () => undefined, dotnet: (offset) => !loaded(offset) };
      } catch {
        // Not an ELF file: a .NET image (PE), whose precompiled code keeps frame pointers.
        return { rowAt: () => undefined, dotnet: () => true };
      }
    };
    if (mapping.dso === '[vdso]') {
      const image = await vdsoImages(this.folder, buildId).next();
      return image.done ? undefined : read(bytesSource(image.value));
    }
    const isKept = this.kept.has(buildId ?? '');
    return withRecordedFile(this.folder, mapping.path, buildId, isKept, this.hostFiles, ({ source }) => read(source));
  }

  lookup(mapping: Mapping, offset: bigint): SymbolHit | undefined | Promise<SymbolHit | undefined> {
    const key = `${mapping.dso}\0${mapping.buildId ?? ''}`;
    const ready = this.loaded.get(key);
    if (ready) return this.lookupIn(ready, mapping, offset);
    return this.fileTable(mapping).then((table) => {
      this.loaded.set(key, table);
      return this.lookupIn(table, mapping, offset);
    });
  }

  /**
   * perf lists in its build-id table the files that samples hit: their tables load now, a few at a time, so that
   * they are ready (or on their way) when the first frame in each asks. A file asked for first loads at once.
   */
  loadAhead(header: PerfDataHeader, signal: AbortSignal | undefined): void {
    const listed = header.features.buildIds
      .filter((entry) => entry.filename.startsWith('/') && !entry.filename.endsWith('.ko'))
      .slice(0, prefetchLimits.files);
    let loading = 0;
    // An aborted run loads no more ahead (the loads under way end by themselves: every read is bounded).
    const next = () => {
      while (loading < prefetchLimits.parallel && listed.length > 0 && !signal?.aborted) {
        const { filename } = listed.shift()!;
        const buildId = this.buildIds.get(filename) ?? this.keptByPath.get(filename);
        if (this.tables.has(`${buildId ?? ''}\0${filename}`)) continue;
        loading++;
        void this.pathTable(filename, buildId).finally(() => {
          loading--;
          next();
        });
      }
    };
    next();
  }

  private lookupIn(table: FileTable, mapping: Mapping, offset: bigint): SymbolHit | undefined {
    if (table.ibtPlt && offset >= table.ibtPlt.start && offset < table.ibtPlt.end) this.pltRenamed.add(mapping.path);
    return table.lookup(offset);
  }

  private fileTable(mapping: Mapping): Promise<FileTable> {
    if (mapping.dso === '[vdso]')
      return (this.vdso ??= vdsoTable(this.folder, mapping.buildId ?? this.buildIds.get('[vdso]')).catch(() =>
        lookupTable([]),
      ));
    const perfMap = /^\/tmp\/perf-(\d+)\.map$/.exec(mapping.dso);
    if (perfMap) return this.perfMaps?.table(Number(perfMap[1])) ?? Promise.resolve(lookupTable([]));
    const buildId = mapping.buildId ?? this.buildIds.get(mapping.path) ?? this.keptByPath.get(mapping.path);
    return this.pathTable(mapping.path, buildId);
  }

  private pathTable(path: string, buildId: string | undefined): Promise<FileTable> {
    const key = `${buildId ?? ''}\0${path}`;
    let table = this.tables.get(key);
    if (!table) {
      const isKept = this.kept.has(buildId ?? '');
      table = loadFileTable(this.folder, path, buildId, isKept, this.hostFiles, this.naming).catch(() =>
        lookupTable([]),
      );
      this.tables.set(key, table);
    }
    return table;
  }
}

/**
 * The kernel's table, made when the first kernel frame asks, after the kernel's mapping record has said where its
 * symbols lay at recording (perf loads kallsyms as late).
 */
class KernelSymbols {
  private table: FunctionTable | undefined;
  private given: { name: string; address: bigint } | undefined;

  constructor(
    private readonly kernel: Awaited<ReturnType<typeof kernelText>>,
    private readonly plt: PltRules,
    private readonly warn: Warn,
  ) {}

  get source(): string | undefined {
    return this.kernel?.source;
  }

  lookup(address: bigint): SymbolHit | undefined {
    return (this.table ?? this.make()).lookup(address);
  }

  reference(given: { name: string; address: bigint } | undefined): void {
    // perf keeps the last record's before its kallsyms loads.
    if (!this.table) this.given = given;
  }

  private make(): FunctionTable {
    this.table = lookupTable([]);
    const kernel = this.kernel;
    if (!kernel) return this.table;
    // Collect's snapshot is of the recording's boot: its addresses are the recording's (and, kept to the code
    // symbols, or trimmed, it may lack the reference symbol).
    const delta = this.given && kernel.source !== layout.kallsyms ? kallsymsDelta(kernel.text, this.given) : 0n;
    if (delta === undefined) {
      this.warn(
        `kernel frames stay unnamed: ${kernel.source} has no symbol ${JSON.stringify(this.given!.name)}, by which ` +
          'perf.data places the kernel',
      );
      return this.table;
    }
    // Symbols end by the rule of the perf that recorded (as PLT entries are named by it).
    return (this.table = kallsymsTable(kernel.text, delta, this.plt));
  }
}

async function loadFileTable(
  folder: OutputFolder,
  path: string,
  buildId: string | undefined,
  isKept: boolean,
  hostFiles: boolean,
  naming: Naming,
): Promise<FileTable> {
  // A recording made elsewhere names its paths on another machine: its debug files here are found by build-id only.
  const given = isKept && !hostFiles ? { ...naming, byBuildIdOnly: true } : naming;
  const table = await withRecordedFile(folder, path, buildId, isKept, hostFiles, (file) =>
    tableFromFile(file, path, buildId, given),
  );
  return table ?? lookupTable([]);
}

/** The recorded file, opened: read in blocks (blockCached), with its ELF facts (undefined: not an ELF file). */
interface RecordedFile {
  source: ByteSource;
  info: ElfInfo | undefined;
}

/**
 * Gives `use` the first of the recorded file's candidates (recordedFileCandidates) that opens and is the recorded
 * file: its build-id the recorded one, unless collect kept it. Closed after; undefined when no candidate is.
 */
async function withRecordedFile<T>(
  folder: OutputFolder,
  path: string,
  buildId: string | undefined,
  isKept: boolean,
  hostFiles: boolean,
  use: (file: RecordedFile) => Promise<T>,
): Promise<T | undefined> {
  for (const candidate of recordedFileCandidates(folder, path, buildId, isKept, hostFiles)) {
    const handle = await candidate.open().catch(() => undefined);
    if (!handle) continue;
    try {
      const source = blockCached(fileByteSource(handle, (await handle.stat()).size, (e) => e as Error));
      const info = await readElf(source, path).catch(() => undefined);
      // perf refuses a file whose build-id is not the recorded one.
      if (!candidate.kept && buildId && info?.buildId !== buildId) continue;
      return await use({ source, info });
    } finally {
      await handle.close();
    }
  }
  return undefined;
}

/** A file that may be the one mapped at recording: opened on demand; `kept` when collect kept it (its id is known). */
interface RecordedFileCandidate {
  kept: boolean;
  open(): Promise<FileHandle | undefined>;
}

/**
 * Where the file mapped at `path` with build-id `buildId` is read, in perf's order: the copy collect kept (and nothing
 * else when it kept one); else, recorded on this machine, the file at the path; else the copy perf record put in the
 * build-id cache. The last two are the recorded file only when their build-id is the recorded one (or none was
 * recorded): the reader checks that.
 */
function recordedFileCandidates(
  folder: OutputFolder,
  path: string,
  buildId: string | undefined,
  isKept: boolean,
  hostFiles: boolean,
): RecordedFileCandidate[] {
  if (isKept && buildId) return [{ kept: true, open: () => folder.openExisting(`${layout.binaries}/${buildId}`) }];
  if (!hostFiles) return [];
  const local = { kept: false, open: () => openMachineFile(path) };
  return buildId ? [local, { kept: false, open: () => openMachineFile(buildIdCachePath(buildId, 'elf')) }] : [local];
}

/** `~/.debug/.build-id/<xx>/<rest>/<file>`: where perf record keeps a copy of each file it sampled (`elf`). */
function buildIdCachePath(buildId: string, file: 'elf' | 'debug'): string {
  return join(homedir(), '.debug', '.build-id', buildId.slice(0, 2), buildId.slice(2), file);
}

/**
 * The table of the recorded file. A file with a `.plt.sec`, in a recording by a perf that names its PLT wrongly (6.1
 * rules), has its PLT entries named as perf 6.12 names them, and says so (FileTable.ibtPlt): both engines name those
 * frames so (plt-rename.ts).
 */
async function tableFromFile(
  file: RecordedFile,
  path: string,
  buildId: string | undefined,
  given: Naming,
): Promise<FileTable> {
  const { source: runtimeSource, info } = file;
  const fileId = info?.buildId;
  const ibtPlt = given.plt === '6.1' ? await pltSecRange(runtimeSource).catch(() => undefined) : undefined;
  if (given.pltSecOnly && !ibtPlt) return lookupTable([]);
  const naming = ibtPlt ? { ...given, plt: '6.12' as const } : given;
  const tagged = (table: FunctionTable): FileTable => (ibtPlt ? Object.assign(table, { ibtPlt }) : table);
  // perf prefers a symbol table from a debug file: by .gnu_debuglink beside the file, then by build-id (the file's
  // own when perf recorded none: it records those of the files that sample addresses hit, not callchains).
  const byLink = !naming.byBuildIdOnly;
  for (const candidate of debugCandidates(info, path, buildId ?? fileId, byLink)) {
    const debug = await openMachineFile(candidate);
    if (!debug) continue;
    try {
      const debugSource = blockCached(fileByteSource(debug, (await debug.stat()).size, (e) => e as Error));
      const debugInfo = await readElf(debugSource, candidate).catch(() => undefined);
      const debugId = debugInfo?.buildId;
      // perf takes a debug file with no build-id when its link names it; found by build-id, it must carry that id.
      if (buildId && (debugId ? debugId !== buildId : !byLink)) continue;
      // perf takes the first candidate with a symbol table (symsrc__has_symtab): a stripped copy in its cache is
      // passed over for the debug file after it.
      if (!debugInfo?.hasSymtab) continue;
      const table = await readFunctionTable(debugSource, runtimeSource, naming);
      if (table.size > 0) return tagged(table);
    } finally {
      await debug.close();
    }
  }
  return tagged(await readFunctionTable(runtimeSource, runtimeSource, naming));
}

/**
 * `source` with its small reads served from blocks of 64 KiB read once (at most 16 kept): readElf reads a file's
 * section headers one at a time, and each read of a file is a round trip through the thread pool.
 */
function blockCached(source: ByteSource): ByteSource {
  const blockSize = 1 << 16;
  const blocks = new Map<number, Promise<Uint8Array>>();
  return {
    size: source.size,
    read(offset, length) {
      const block = Math.floor(offset / blockSize);
      if (length > 4096 || Math.floor((offset + length - 1) / blockSize) !== block) return source.read(offset, length);
      let bytes = blocks.get(block);
      if (!bytes) {
        if (blocks.size >= 16) blocks.delete(blocks.keys().next().value!);
        bytes = source.read(block * blockSize, blockSize);
        blocks.set(block, bytes);
      }
      const at = offset - block * blockSize;
      return bytes.then((b) => b.subarray(at, Math.min(b.length, at + length)));
    },
  };
}

/**
 * Where perf looks for the symbols of `path` before the file itself, in its order (dso.c's binary_type_symtab:
 * DEBUGLINK, BUILD_ID_CACHE, BUILD_ID_CACHE_DEBUGINFO, FEDORA_DEBUGINFO, UBUNTU_DEBUGINFO, BUILDID_DEBUGINFO): the
 * first holding symbols names the file's frames.
 */
function debugCandidates(
  runtime: ElfInfo | undefined,
  path: string,
  buildId: string | undefined,
  byLink: boolean,
): string[] {
  const candidates: string[] = [];
  const link = byLink ? runtime?.debugLink?.file : undefined;
  if (link && !link.includes('/') && path.startsWith('/')) {
    const dir = dirname(path);
    candidates.push(join(dir, link), join(dir, '.debug', link), join('/usr/lib/debug', dir, link));
  }
  // perf's build-id cache holds what perf record copied: the file, and its debug file when one was added.
  if (buildId) candidates.push(buildIdCachePath(buildId, 'elf'), buildIdCachePath(buildId, 'debug'));
  if (byLink && path.startsWith('/')) candidates.push(`/usr/lib/debug${path}.debug`, `/usr/lib/debug${path}`);
  if (buildId) candidates.push(`/usr/lib/debug/.build-id/${buildId.slice(0, 2)}/${buildId.slice(2)}.debug`);
  return candidates;
}

/**
 * The recorded [vdso]'s symbols: from the image collect kept (target/vdso), when its build-id is the recorded one or
 * none was recorded; else as perf finds them. With a build-id recorded (perf's build-id table; `--buildid-mmap`
 * records none for the vdso, which is no file), perf reads only its cache's copy, `~/.debug/[vdso]/<build-id>/vdso`,
 * and prints `[unknown]` without it (even on the recording's kernel): so does this. With none recorded, perf names the
 * frames from its own vdso, whatever the recording's kernel: so does this, from this process's.
 */
async function vdsoTable(folder: OutputFolder, recordedBuildId: string | undefined): Promise<FunctionTable> {
  for await (const image of vdsoImages(folder, recordedBuildId)) {
    const table = await readFunctionTable(bytesSource(image)).catch(() => undefined);
    if (table && table.size > 0) return table;
  }
  return lookupTable([]);
}

/** The vdso images that may be the recorded one, in vdsoTable's order, each of the recorded build-id if one was. */
async function* vdsoImages(folder: OutputFolder, recordedBuildId: string | undefined): AsyncGenerator<Uint8Array> {
  const kept = await folder
    .read(layout.vdso, { maxBytes: maxVdsoBytes, timeoutMs: 10_000 })
    .then(({ bytes, truncated }) => (truncated ? undefined : bytes))
    .catch(() => undefined);
  const images = [
    () => Promise.resolve(kept),
    async () =>
      recordedBuildId
        ? (await readMachineFile(join(homedir(), '.debug', '[vdso]', recordedBuildId, 'vdso'), maxVdsoBytes))?.bytes
        : await ownVdso().catch(() => undefined),
  ];
  for (const next of images) {
    const image = await next();
    if (!image) continue;
    const id = (await readElf(bytesSource(image), '[vdso]').catch(() => undefined))?.buildId;
    if (recordedBuildId && id !== recordedBuildId) continue;
    yield image;
  }
}

/**
 * The kallsyms text that names the recording's kernel, and where it was read: the folder's snapshot; else this
 * machine's /proc/kallsyms when the recording's kernel runs here; else the copy perf record kept in the build-id
 * cache. Undefined when there is none (with a warning).
 */
async function kernelText(
  folder: OutputFolder,
  recordedBuildId: string | undefined,
  warn: Warn,
): Promise<{ text: Buffer; source: string } | undefined> {
  const kept = await folder
    .read(layout.kallsyms, { maxBytes: maxKallsymsBytes, timeoutMs: 10_000 })
    .then(({ bytes }) => bytes)
    .catch(() => undefined);
  if (kept !== undefined) return { text: kept, source: layout.kallsyms };
  const running = await runningKernelBuildId();
  if (recordedBuildId && running !== recordedBuildId) {
    // Another kernel (this machine's before a reboot, or another machine's): perf reads the copy of its kallsyms that
    // perf record left in the build-id cache, found by the recorded build-id.
    const cached = await cachedKallsyms(recordedBuildId);
    if (cached) return { text: cached.bytes, source: cached.path };
    warn(
      'kernel frames stay unnamed: the folder has no kallsyms snapshot, the recording’s kernel is not this one, and ' +
        `perf’s build-id cache has no kallsyms of it (~/.debug/[kernel.kallsyms]/${recordedBuildId}/kallsyms)`,
    );
    return undefined;
  }
  // Read whole in one blocking call: the kernel gives /proc/kallsyms a page per read(), and a thousand round trips
  // through the thread pool (where the files' tables load meanwhile) took twice as long as the ~50 ms this takes.
  try {
    return { text: readFileSync('/proc/kallsyms'), source: '/proc/kallsyms' };
  } catch {
    // No kernel symbols then, as when addresses are hidden.
    return undefined;
  }
}

/**
 * The kallsyms perf record keeps of the kernel with build-id `buildId` in this machine's build-id cache,
 * `~/.debug/[kernel.kallsyms]/<build-id>/kallsyms`, else at the older layout's `~/.debug/[kernel.kallsyms]/<build-id>`
 * (perf's build_id_cache__kallsyms_path, where dso__find_kallsyms looks for a kernel other than the running one):
 * read whole up to maxKallsymsBytes when it is a regular file; undefined otherwise, or when `buildId` is not one
 * (perf.data may come from anybody: the build-id becomes part of a path).
 */
async function cachedKallsyms(buildId: string): Promise<{ bytes: Buffer; path: string } | undefined> {
  if (!isBuildId(buildId)) return undefined;
  const entry = join(homedir(), '.debug', '[kernel.kallsyms]', buildId);
  for (const path of [join(entry, 'kallsyms'), entry]) {
    const bytes = (await readMachineFile(path, maxKallsymsBytes))?.bytes;
    if (bytes) return { bytes, path };
  }
  return undefined;
}

/** The running kernel's build-id, from the NT_GNU_BUILD_ID note in /sys/kernel/notes. */
async function runningKernelBuildId(): Promise<string | undefined> {
  const notes = await readFile('/sys/kernel/notes').catch(() => undefined);
  if (!notes) return undefined;
  for (let at = 0; at + 12 <= notes.length;) {
    const nameSize = notes.readUInt32LE(at);
    const descSize = notes.readUInt32LE(at + 4);
    const type = notes.readUInt32LE(at + 8);
    const nameAt = at + 12;
    const descAt = nameAt + Math.ceil(nameSize / 4) * 4;
    if (type === 3 && notes.toString('latin1', nameAt, nameAt + 3) === 'GNU')
      return notes.toString('hex', descAt, descAt + descSize);
    at = descAt + Math.ceil(descSize / 4) * 4;
  }
  return undefined;
}

/**
 * For `--engine perf` on a recording by a perf that names `.plt.sec` frames wrongly (6.1 rules): the files perf.data
 * lists that have one, each with its table (the PLT named as perf 6.12 names it), found as the built-in engine finds
 * them; empty for any other recording. plt-rename.ts renames perf script's frames there from them.
 */
export async function ibtPltTables(
  folder: OutputFolder,
  header: PerfDataHeader,
  { demangle = true }: { demangle?: boolean } = {},
): Promise<Map<string, IbtPltTable>> {
  const out = new Map<string, IbtPltTable>();
  if (versionAtLeast(header.features.perfVersion ?? '', 6, 2)) return out;
  const kept = await readKeptIndex(folder).catch(() => new Map<string, KeptBinary>());
  const keptByPath = new Map<string, string | undefined>();
  for (const { path, buildId } of kept.values()) keptByPath.set(path, keptByPath.has(path) ? undefined : buildId);
  const hostFiles = recordedHere(header);
  // The files perf.data's build-id table lists (the files samples hit), and those collect kept (a recording with
  // --buildid-mmap, as collect makes, has no such table: its build-ids are in the mapping records).
  const listed = new Map<string, string | undefined>();
  for (const { filename, buildId } of header.features.buildIds)
    if (filename.startsWith('/') && !filename.endsWith('.ko')) listed.set(filename, buildId || undefined);
  for (const { path, buildId } of kept.values()) if (!listed.has(path)) listed.set(path, buildId);
  for (const [filename, recorded] of [...listed].slice(0, prefetchLimits.files * 8)) {
    const buildId = recorded ?? keptByPath.get(filename);
    // Only a file with a .plt.sec is renamed: its section headers say so, before its symbols are read.
    const naming: Naming = { demangle: demangle && 'perf6.1', plt: '6.1', pltSecOnly: true };
    const table = await loadFileTable(folder, filename, buildId, kept.has(buildId ?? ''), hostFiles, naming).catch(
      () => undefined,
    );
    if (table?.ibtPlt) out.set(filename, table as IbtPltTable);
  }
  return out;
}

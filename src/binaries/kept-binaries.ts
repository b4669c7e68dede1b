// The target's native binaries, kept in the output folder so that perf script names their frames once the target is
// gone: on this machine after the target exited, in a fresh container after the target's stop killed the sidecar, or
// on a colleague's laptop. perf record would copy sampled files into its own cache, but whole, however large, through
// the target's links, and into a cache that dies with the sidecar; profcpu records with -N and keeps them itself:
// the target's files (TargetFiles: inside its root, capped) in; `target/binaries/<build-id>` and an index
// (`target/binaries.json`) out, for ELF files with a build-id only, up to a size per file and in all. Only the parts
// perf reads to name frames are copied (headers, symbol and string tables, notes, the PLT: see ElfInfo.namingRanges),
// at their offsets in a sparse file: node's 98 MB binary keeps a few MB, libcoreclr.so's 7 MB a few hundred KB; a
// recording with stack copies (collect --unwind mixed) keeps the call frame information too (ElfInfo.unwindRanges:
// libcoreclr.so's is 830 KB), and keeps what it kept before recording whether sampled or not (perf's own unwinding
// reaches fewer of them; a library loaded during the recording is kept only when perf's unwinding sampled it).
//
// As a collect step: before recording, every executable file mapped then (so a recording cut short by a kill still
// has them); after recording, whatever perf sampled that is not kept yet (a library loaded meanwhile), then what was
// not sampled is removed again, so the output folder carries what the flame graph needs and no more (unless perf recorded no
// build-ids at all, -B: then all stay).
import type { FileHandle } from 'node:fs/promises';
import { sampledFilesOf, type CollectStep, type StepContext, type StepReport } from '../step/step.js';
import { layout } from '../output/layout.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { copyRange, openForReading, withDeadline } from '../files/bounded-read.js';
import { OutputFolder, outputModes } from '../files/output-folder.js';
import { isMissing, RootedPathError, type PathHandle } from '../files/rooted.js';
import { isAnonymous, isExecutable, parseProcMaps } from '../target/proc-maps.js';
import { readProcText } from '../target/procfs.js';
import type { TargetFiles } from '../target/target-files.js';
import { fileByteSource, mergeRanges, readElf } from '../formats/elf/elf.js';

export interface KeptBinariesOptions {
  /** Largest binary kept. Default 256 MiB: libcoreclr.so is about 7 MB; a larger "library" is skipped. */
  maxFileBytes: number;
  /**
   * Bytes kept in one run at most, counted as the files' apparent sizes (holes included: a tarball and a build-id
   * view read them). Default 1 GiB.
   */
  maxTotalBytes: number;
  /** Binaries kept in one run at most. Default 512 (a large service maps a few hundred libraries). */
  maxFiles: number;
  /** Time allowed for one copy, ms. Default 60 s. */
  copyTimeoutMs: number;
  /**
   * Keep each file's call frame information too (`.eh_frame` and its search table, `.debug_frame`), which unwinding
   * a recording with stack copies reads (collect --unwind mixed). Default false.
   */
  unwindSections: boolean;
  /**
   * Time one pass over the target's files may take, ms; the files left are reported skipped. Default 120 s: the
   * target chooses how many files it maps and what they hold, so without it a few thousand crafted ones would hold
   * the recording back for hours.
   */
  passTimeoutMs: number;
}

export const keptBinariesDefaults: Readonly<KeptBinariesOptions> = Object.freeze({
  maxFileBytes: 256 << 20,
  maxTotalBytes: 1 << 30,
  maxFiles: 512,
  copyTimeoutMs: 60_000,
  passTimeoutMs: 120_000,
  unwindSections: false,
});

/**
 * A binary in target/binaries: where it was in the target, its build-id (its file name), its size, and the bytes
 * actually kept (the parts perf reads to name frames; the rest is a hole).
 */
export interface KeptBinary {
  path: string;
  buildId: string;
  bytes: number;
  storedBytes: number;
}

export interface BinaryOutcome {
  path: string;
  buildId?: string;
  /**
   * kept: copied now; present: kept already; skipped: refused (reason says why); missing: not in the target;
   * removed: kept before recording, not sampled.
   */
  status: 'kept' | 'present' | 'skipped' | 'missing' | 'removed';
  bytes?: number;
  storedBytes?: number;
  reason?: string;
}

/** What to keep: a path in the target, and the build-id perf recorded for it when known. */
export interface WantedBinary {
  path: string;
  buildId?: string;
}

/** Paths that are no file in the target: the kernel, vdso, perf maps, JIT dumps, anonymous or deleted memory. */
function isTargetFile(path: string): boolean {
  return (
    path.startsWith('/') && !path.startsWith('/tmp/perf-') && !path.startsWith('//') && !/ \(deleted\)$/.test(path)
  );
}

const buildIdPattern = /^[0-9a-f]{4,128}$/;

/** The kept binaries of a folder, by build-id, as its index lists them (entries that are not sane are dropped). */
export async function readKeptIndex(folder: OutputFolder): Promise<Map<string, KeptBinary>> {
  const kept = new Map<string, KeptBinary>();
  const text = await folder
    .read(layout.binariesIndex, { maxBytes: 16 << 20, timeoutMs: 10_000 })
    .then((read) => (read.truncated ? undefined : read.bytes.toString('utf8')))
    .catch(() => undefined);
  if (text === undefined) return kept;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return kept;
  }
  const list = (parsed as { binaries?: unknown } | null)?.binaries;
  if (!Array.isArray(list)) return kept;
  for (const entry of list.slice(0, 10_000) as Partial<KeptBinary>[]) {
    if (
      typeof entry?.buildId === 'string' &&
      buildIdPattern.test(entry.buildId) &&
      typeof entry.path === 'string' &&
      entry.path.length < 4096 &&
      typeof entry.bytes === 'number' &&
      typeof entry.storedBytes === 'number'
    )
      kept.set(entry.buildId, {
        path: entry.path,
        buildId: entry.buildId,
        bytes: entry.bytes,
        storedBytes: entry.storedBytes,
      });
  }
  return kept;
}

/** Written whole under another name, then renamed: a pass killed at any point leaves the last index whole. */
async function writeKeptIndex(folder: OutputFolder, kept: Map<string, KeptBinary>): Promise<void> {
  const binaries = [...kept.values()].sort((a, b) => a.path.localeCompare(b.path));
  const partial = `${layout.binariesIndex}.partial`;
  await folder.writeFile(partial, `${JSON.stringify({ binaries }, null, 2)}\n`, outputModes.privateFile);
  await folder.rename(partial, layout.binariesIndex);
}

/**
 * Copies the `wanted` files of the target into `folder`'s target/binaries (adding them to `kept`); one outcome per
 * wanted target file. A file whose build-id is not the one perf recorded, that is no ELF file with a build-id, or
 * that passes a limit is skipped.
 */
export async function keepBinaries(
  wanted: readonly WantedBinary[],
  files: TargetFiles,
  folder: OutputFolder,
  kept: Map<string, KeptBinary>,
  options: Partial<KeptBinariesOptions> = {},
  signal?: AbortSignal,
): Promise<BinaryOutcome[]> {
  const opts = { ...keptBinariesDefaults, ...options };
  const outcomes: BinaryOutcome[] = [];
  const passEnds = Date.now() + opts.passTimeoutMs;
  const total = [...kept.values()].reduce((sum, b) => sum + b.bytes, 0);
  const binaries = await folder.folder(layout.binaries, { create: true, mode: outputModes.privateFolder });
  const pass: Pass = { opts, files, folder, binaries, kept, signal, passEnds, total, outcomes };
  try {
    for (const binary of wanted.filter((w) => isTargetFile(w.path))) await keepOne(pass, binary);
  } finally {
    await removePartials(binaries);
    await binaries.close();
  }
  await writeKeptIndex(folder, kept);
  return outcomes;
}

/** One call of keepBinaries: its limits, where it keeps, the bytes kept so far, and the outcomes said. */
interface Pass {
  opts: KeptBinariesOptions;
  files: TargetFiles;
  folder: OutputFolder;
  /** The folder's target/binaries. */
  binaries: OutputFolder;
  kept: Map<string, KeptBinary>;
  signal: AbortSignal | undefined;
  passEnds: number;
  total: number;
  outcomes: BinaryOutcome[];
}

function skipped({ path, buildId }: WantedBinary, reason: string): BinaryOutcome {
  return { path, ...(buildId && { buildId }), status: 'skipped', reason };
}

/** One wanted file: present already, the pass over, gone, or opened and kept (or skipped); its outcome said. */
async function keepOne(pass: Pass, wanted: WantedBinary): Promise<void> {
  const { opts, kept, outcomes } = pass;
  const { path, buildId } = wanted;
  if (buildId !== undefined && kept.has(buildId)) {
    outcomes.push({ path, buildId, status: 'present', bytes: kept.get(buildId)!.bytes });
    return;
  }
  if (pass.signal?.aborted) throw new ProfcpuError('ABORTED', 'keeping the target’s binaries was interrupted');
  if (Date.now() > pass.passEnds) {
    outcomes.push(skipped(wanted, `the ${opts.passTimeoutMs / 1000} s for one pass over the target's files are over`));
    return;
  }
  let handle;
  try {
    handle = await pass.files.lookup(path, 'file');
  } catch (error) {
    // Gone is expected (a library deleted since it was mapped); a refusal or a lookup past its deadline is said.
    if (isMissing(error)) outcomes.push({ path, status: 'missing' });
    else outcomes.push(skipped(wanted, error instanceof RootedPathError ? error.reason : (error as Error).message));
    return;
  }
  try {
    await keepWithinLimits(pass, wanted, handle);
  } catch (error) {
    if (isProfcpuError(error, 'ABORTED')) throw error;
    outcomes.push(skipped(wanted, error instanceof Error ? error.message : String(error)));
  } finally {
    await handle.close();
  }
}

/** An opened file, unless it passes a limit, copied within the copy's deadline; indexed as soon as it is kept. */
async function keepWithinLimits(pass: Pass, wanted: WantedBinary, handle: PathHandle): Promise<void> {
  const { opts, signal } = pass;
  const size = handle.stat.size;
  const limit = limitPassed(pass, size);
  if (limit !== undefined) {
    pass.outcomes.push(skipped(wanted, limit));
    return;
  }
  const outcome = await withDeadline({ timeoutMs: opts.copyTimeoutMs, signal }, wanted.path, (live) =>
    copyBinary(pass, wanted, handle, size, live),
  );
  pass.outcomes.push(outcome);
  if (outcome.status === 'kept') {
    pass.total += size;
    // Indexed at once: what a killed pass kept is still found (postprocess uses indexed binaries only).
    await writeKeptIndex(pass.folder, pass.kept);
  }
}

/** Why a file of `size` bytes is not kept in this pass, if a limit says so. */
function limitPassed({ opts, total, kept }: Pass, size: number): string | undefined {
  if (size > opts.maxFileBytes) return `${size} bytes, more than the ${opts.maxFileBytes}-byte limit`;
  if (total + size > opts.maxTotalBytes) return `the ${opts.maxTotalBytes}-byte limit for one run is reached`;
  if (kept.size >= opts.maxFiles) return `the limit of ${opts.maxFiles} binaries for one run is reached`;
  return undefined;
}

/**
 * Removes the `.partial` copies left in the folder: a copy given up at its deadline (which may have started writing
 * before it) removes its own only while the folder is open, and the pass closes it as soon as it moves on.
 */
async function removePartials(binaries: OutputFolder): Promise<void> {
  const names = await binaries.list('.').catch(() => [] as string[]);
  for (const name of names) if (name.endsWith('.partial')) await binaries.remove(name).catch(() => undefined);
}

/** The file's build-id checked, then what perf reads to name frames copied under it and added to `kept`. */
async function copyBinary(
  pass: Pass,
  wanted: WantedBinary,
  handle: PathHandle,
  size: number,
  live: () => boolean,
): Promise<BinaryOutcome> {
  const { path, buildId } = wanted;
  const source = await openForReading(handle);
  try {
    const elf = await readElf(
      fileByteSource(source, size, (cause) => cause as Error),
      path,
    ).catch(() => undefined);
    const found = elf?.buildId;
    if (elf === undefined || found === undefined || !buildIdPattern.test(found))
      return skipped(wanted, 'not an ELF file with a build-id');
    if (buildId !== undefined && found !== buildId) return skipped(wanted, `its build-id is now ${found}`);
    if (pass.kept.has(found)) return { path, buildId: found, status: 'present', bytes: size } as BinaryOutcome;
    // Work that outlived its deadline writes nothing: the loop has moved on and may have closed `binaries`.
    if (!live()) throw new Error('abandoned');
    const ranges = pass.opts.unwindSections
      ? mergeRanges([...elf.namingRanges, ...elf.unwindRanges])
      : elf.namingRanges;
    const stored = await copyNamingRanges(pass.binaries, source, ranges, found, size, live);
    pass.kept.set(found, { path, buildId: found, bytes: size, storedBytes: stored });
    return { path, buildId: found, status: 'kept', bytes: size, storedBytes: stored } as BinaryOutcome;
  } finally {
    await source.close();
  }
}

/**
 * What perf reads to name frames, at the same offsets; the rest (code, data) stays a hole. Under another name until
 * whole: the reader may be killed mid-copy (a later file hangs the pass), and a binary under its build-id is a
 * complete one. Gives the bytes written.
 */
async function copyNamingRanges(
  binaries: OutputFolder,
  source: FileHandle,
  ranges: readonly [number, number][],
  buildId: string,
  size: number,
  live: () => boolean,
): Promise<number> {
  const partial = `${buildId}.partial`;
  const dest = await binaries.create(partial, outputModes.privateFile);
  let stored = 0;
  try {
    try {
      for (const [from, to] of ranges) stored += (await copyRange(source, dest, from, to, live)).written;
      await dest.truncate(size);
    } finally {
      await dest.close();
    }
    if (!live()) throw new Error('abandoned');
    await binaries.rename(partial, buildId);
  } catch (error) {
    await binaries.remove(partial).catch(() => undefined);
    throw error;
  }
  return stored;
}

/** Removes from the folder the kept binaries whose build-id is not in `sampled`. */
async function removeUnsampled(
  folder: OutputFolder,
  kept: Map<string, KeptBinary>,
  sampled: ReadonlySet<string>,
): Promise<BinaryOutcome[]> {
  const removed: BinaryOutcome[] = [];
  for (const binary of [...kept.values()].filter((b) => !sampled.has(b.buildId))) {
    await folder.remove(`${layout.binaries}/${binary.buildId}`);
    kept.delete(binary.buildId);
    removed.push({ path: binary.path, buildId: binary.buildId, status: 'removed', storedBytes: binary.storedBytes });
  }
  await writeKeptIndex(folder, kept);
  return removed;
}

/** The files mapped executable in the target now, from /proc/PID/maps. */
async function mappedExecutables(context: StepContext): Promise<WantedBinary[]> {
  const text = await readProcText(context.target.pid, 'maps', { procRoot: context.procRoot });
  const paths = new Set<string>();
  for (const mapping of parseProcMaps(text ?? '').mappings)
    if (isExecutable(mapping) && !isAnonymous(mapping)) paths.add(mapping.path);
  return [...paths].map((path) => ({ path }));
}

function summarize(outcomes: readonly BinaryOutcome[]) {
  const count = (status: BinaryOutcome['status']) => outcomes.filter((o) => o.status === status);
  return {
    kept: count('kept').length,
    keptBytes: count('kept').reduce((sum, o) => sum + (o.storedBytes ?? 0), 0),
    skipped: count('skipped').map(({ path, reason }) => ({ path, reason })),
  };
}

/** The collect step; see the top of this file. */
export function keptBinariesStep(options: Partial<KeptBinariesOptions> = {}): CollectStep {
  const withUnwind = (context: StepContext): Partial<KeptBinariesOptions> =>
    context.unwind === 'mixed' ? { ...options, unwindSections: true } : options;
  const withFolder = async <T>(
    context: StepContext,
    work: (folder: OutputFolder, files: TargetFiles) => Promise<T>,
  ) => {
    if (!context.files) throw new Error('the binaries step needs the session’s view of the target');
    const folder = await OutputFolder.open(context.dir);
    try {
      return await work(folder, context.files);
    } finally {
      await folder.close();
    }
  };
  return {
    name: 'binaries',
    beforeRecording: (context) =>
      withFolder(context, async (folder, files): Promise<StepReport> => {
        const kept = await readKeptIndex(folder);
        const wanted = await mappedExecutables(context);
        const outcomes = await keepBinaries(wanted, files, folder, kept, withUnwind(context), context.signal);
        // Mapped files that are no ELF (.NET's PE images, fonts) are expected: only real refusals are reported.
        const { skipped, ...counts } = summarize(outcomes);
        return { ...counts, skipped: skipped.filter((s) => s.reason !== 'not an ELF file with a build-id') };
      }),
    afterRecording: (context) =>
      withFolder(context, async (folder, files): Promise<StepReport> => {
        const sampled = await sampledFilesOf(context);
        const kept = await readKeptIndex(folder);
        const outcomes = await keepBinaries(sampled, files, folder, kept, withUnwind(context), context.signal);
        for (const o of outcomes.filter((o) => o.status === 'skipped'))
          context.warn(`${o.path} is not kept for naming after the target exits: ${o.reason}`);
        // perf recording with -B (the target maps files from a FUSE or network file system: src/collect/session.ts)
        // lists its files with no build-id, so none is known unsampled: what was kept stays, and binaries.json gives
        // each its build-id, read here from the file itself.
        // Recorded with stack copies, perf knows only the files its own unwinding reached (it stops at JIT code): the
        // callers past it are unwound at postprocess, in files perf never marked sampled, so all stay.
        const known = sampled.filter((s) => isTargetFile(s.path));
        const removed =
          known.length > 0 && context.unwind !== 'mixed'
            ? await removeUnsampled(folder, kept, new Set(known.map((s) => s.buildId)))
            : [];
        return {
          ...summarize(outcomes),
          removed: removed.length,
          binaries: [...kept.values()],
        };
      }),
  };
}

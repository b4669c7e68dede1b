// What the pprof profiles of an output folder say besides their stacks: the sample types and period that match the
// recording (CPU samples as the nanoseconds they stand for, off-CPU and wall-clock time in nanoseconds), the labels
// (pid, container id), the target's native files with their build-ids (target/binaries.json) and where the target
// mapped their code (target/maps), so that a backend can symbolise what profcpu could not: the address of each frame
// left unnamed is placed in its file's mapping. Everything read here comes from the folder: bounded and checked readers
// only.
import { basename } from 'node:path';
import { readKeptIndex } from '../binaries/kept-binaries.js';
import type { Warn } from '../diagnostics.js';
import { folderReadLimits } from '../dotnet/naming/folder-resolver.js';
import { layout } from '../output/layout.js';
import { FileCodeMappings, parseProcMaps, placesInFile, type ProcMapping } from '../target/proc-maps.js';
import type { OutputFolder } from '../files/output-folder.js';
import type { PerfDataHeader } from '../engine/perf-data/record-walk.js';
import { isClockEvent, microsecondsPerSample } from '../engine/offcpu/offcpu-fold.js';
import { readTargetIds } from '../output/target-info.js';
import type { PprofAddress, PprofBinary, PprofLabel, PprofOptions } from '../render/pprof.js';
import type { AddressedStack, FoldResult } from '../stacks/fold.js';

/** What every profile of the folder shares. */
export interface PprofFolderFacts {
  labels: PprofLabel[];
  binaries: PprofBinary[];
  /** Where an unnamed native frame lay in the target (from target/maps); absent without the snapshot. */
  locate?: (file: string, ip: string) => PprofAddress | undefined;
  /** When the recording started, estimated from perf.data's date (written at its end) less its length. */
  timeNanos?: bigint;
  durationNanos?: number;
}

/** `endMs`: perf.data's mtime (perf writes its header last); `durationMs`: from its first sample to its last. */
export async function pprofFolderFacts(
  folder: OutputFolder,
  endMs: number,
  durationMs: number | undefined,
  warn: Warn,
): Promise<PprofFolderFacts> {
  const ids = await readTargetIds(folder);
  const labels: PprofLabel[] = [];
  if (ids) labels.push({ key: 'pid', num: ids.pid });
  if (ids?.containerId) labels.push({ key: 'container_id', str: ids.containerId });
  // pprof takes the first mapping for the program's own: the target's executable first (its comm is its file's name,
  // cut to 15 characters), then by path.
  const main = (path: string) => (ids?.comm !== undefined && basename(path).startsWith(ids.comm) ? 0 : 1);
  const code = await executableFileMappings(folder, warn);
  const binaries = [...(await readKeptIndex(folder)).values()]
    .map(({ path, buildId }): PprofBinary => {
      const m = code?.ofPath(path)[0];
      return { path, buildId, ...(m && { range: { start: m.start, limit: m.end, offset: m.offset } }) };
    })
    .sort((a, b) => main(a.path) - main(b.path) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  const durationNanos = durationMs === undefined ? undefined : Math.round(durationMs * 1e6);
  const startMs = Math.round(endMs - (durationMs ?? 0));
  return {
    labels,
    binaries,
    ...(code && { locate: (file: string, ip: string) => locate(code.of(file), ip) }),
    ...(durationNanos !== undefined && { durationNanos }),
    ...(startMs > 0 && { timeNanos: BigInt(startMs) * 1_000_000n }),
  };
}

/**
 * The target's executable mappings of files (target/maps), known by their paths without ` (deleted)`, as the fold
 * names their files; undefined without the snapshot.
 */
async function executableFileMappings(folder: OutputFolder, warn: Warn): Promise<FileCodeMappings | undefined> {
  let text: string;
  try {
    const read = await folder.read(layout.procMaps, {
      maxBytes: folderReadLimits.procMapsBytes,
      timeoutMs: folderReadLimits.timeoutMs,
    });
    if (read.truncated)
      warn(`${layout.procMaps} is larger than ${folderReadLimits.procMapsBytes} bytes: only its start is used`);
    text = read.bytes.toString('utf8');
  } catch {
    // No snapshot (a recording made by hand): the profiles carry no addresses.
    return undefined;
  }
  const deleted = ' (deleted)';
  return new FileCodeMappings(parseProcMaps(text).mappings, ({ path }) =>
    !path.startsWith('/') ? undefined : path.endsWith(deleted) ? path.slice(0, -deleted.length) : path,
  );
}

/** The place in the target of an unnamed frame perf printed at `ip` in a file mapped as `candidates` (the first). */
function locate(candidates: readonly ProcMapping[], ip: string): PprofAddress | undefined {
  if (ip.length > 16 || !/^[0-9a-fA-F]+$/.test(ip)) return undefined;
  const place = placesInFile(BigInt(`0x${ip}`), candidates)[0];
  if (!place) return undefined;
  const { mapping: m, address } = place;
  return { path: m.path, range: { start: m.start, limit: m.end, offset: m.offset }, address };
}

/**
 * The CPU profile's sample types: each sample as a count and as the CPU time it stands for (1/frequency of a
 * frequency-sampled event, the period of cpu-clock or task-clock, nanoseconds), as Go's CPU profiles give them; a
 * count alone when the event's samples stand for no known time. Folded by period (`--weight period`), the values
 * are the event's own periods: nanoseconds for the clock events, counts of events otherwise.
 */
export function cpuPprofOptions(
  fold: FoldResult,
  header: PerfDataHeader | undefined,
  weight: 'samples' | 'period' | undefined,
  facts: PprofFolderFacts,
): Partial<PprofOptions> {
  const eventName = fold.foldedEvent ?? fold.events[0];
  const attr =
    header?.attrs.find((a) => a.name === eventName) ?? (header?.attrs.length === 1 ? header.attrs[0] : undefined);
  const clock = attr !== undefined && isClockEvent(attr);
  const common = {
    ...facts,
    frameFiles: fold.frameFiles,
    addressed: fold.addressed,
    comments: [`profcpu: ${eventName ?? 'samples'}`],
  };
  if (weight === 'period')
    return {
      ...common,
      sampleTypes: [
        clock
          ? { type: 'cpu', unit: 'nanoseconds', perWeight: 1 }
          : { type: eventName ?? 'events', unit: 'count', perWeight: 1 },
      ],
    };
  const us = attr && microsecondsPerSample(attr);
  if (us === undefined) return { ...common, sampleTypes: [{ type: 'samples', unit: 'count', perWeight: 1 }] };
  const ns = us * 1000;
  return {
    ...common,
    sampleTypes: [
      { type: 'samples', unit: 'count', perWeight: 1 },
      { type: 'cpu', unit: 'nanoseconds', perWeight: ns },
    ],
    period: { type: 'cpu', unit: 'nanoseconds', value: Math.round(ns) },
  };
}

/**
 * A profile of time folded in microseconds (off-CPU, wall-clock), written in nanoseconds as pprof's tools expect.
 * Off-CPU time is `blocked`, not `off_cpu`: Pyroscope files every sample type whose name holds "cpu" as CPU time.
 */
export function timePprofOptions(
  type: 'blocked' | 'wall',
  stacks: { frameFiles: ReadonlyMap<string, string>; addressed: readonly AddressedStack[] },
  facts: PprofFolderFacts,
): Partial<PprofOptions> {
  return {
    ...facts,
    frameFiles: stacks.frameFiles,
    addressed: stacks.addressed,
    sampleTypes: [{ type, unit: 'nanoseconds', perWeight: 1000 }],
    comments: [
      type === 'wall' ? 'profcpu: wall-clock (running, blocked, waiting for a CPU)' : 'profcpu: off-CPU, time blocked',
    ],
  };
}

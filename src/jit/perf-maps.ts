// Puts the perf-map copies an output folder keeps where perf script looks for them, for the time perf script runs.
// Takes the folder (its `target/perf-<nspid>.map` and `target/target.json`, and copies `perf-<pid>.map` beside
// perf.data), gives the list of files placed and a `remove()` that deletes exactly those.
//
// Why: perf names JIT frames from `/tmp/perf-<pid>.map`, <pid> being the PID recorded in perf.data. Once the target is
// gone (or when it lived in another mount namespace) only perf's own /tmp is consulted, so the copy taken during the
// recording has to go there, under the PID perf saw, which differs from the namespace PID in the file's name when the
// target ran in its own PID namespace. target.json (written by collect) says both: `{ pid, nspid }`. Without it, each
// `target/perf-N.map` is placed as /tmp/perf-N.map, which is right for a target that ran in perf's PID namespace (a
// process on the host, `profcpu demo`), and a warning says so.
//
// A file already at the destination is never replaced: it may be the live map of a running target (then it is the
// better copy) or someone else's. Placed copies belong to the current user, as perf requires, and are private.
//
// The folder may have come from anybody: its files are read without following links (OutputFolder), and every line
// placed is cut to 4 KiB, so a name the target made megabytes long never reaches perf (it would print it for every
// sample).
import { lstat, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { Warn } from '../diagnostics.js';
import { layout } from '../output/layout.js';
import { readTargetIds as readTargetInfo, type TargetIds } from '../output/target-info.js';
import { openForReading } from '../files/bounded-read.js';
import { createExclusive, OutputFolder, outputModes } from '../files/output-folder.js';
import { LongLineCutter } from '../stacks/long-lines.js';

/** Longest perf-map line placed; longer ones are cut (a real .NET method name is a few hundred bytes). */
export const placedLineBytes = 4096;

/** Bytes of a perf-map copy placed at most (what postprocess reads of a snapshot, src/dotnet/naming/folder-resolver.ts). */
export const placedMaxBytes = 1024 ** 3;

export interface PlacedPerfMap {
  /** The copy in the output folder, relative to it. */
  from: string;
  /** Where perf script reads it. */
  placedAt: string;
}

export interface PerfMapPlacement {
  placed: PlacedPerfMap[];
  /** Deletes the files placed, unless something else replaced them meanwhile. Safe to call more than once. */
  remove(): Promise<void>;
}

/**
 * Places the folder's perf-map copies. `perfTmp` is where perf looks (`/tmp`; other values are for tests); `euid`,
 * when known, is the user perf runs as.
 * Never throws for a missing or unreadable copy: perf script still runs, with fewer names, and `warn` says why.
 */
export async function placePerfMaps(
  source: OutputFolder | string,
  warn: Warn,
  options: { perfTmp?: string; euid?: number | undefined } = {},
): Promise<PerfMapPlacement> {
  const folder = typeof source === 'string' ? await OutputFolder.open(source) : source;
  try {
    return await placeFrom(folder, warn, options);
  } finally {
    if (typeof source === 'string') await folder.close();
  }
}

async function placeFrom(
  folder: OutputFolder,
  warn: Warn,
  options: { perfTmp?: string; euid?: number | undefined },
): Promise<PerfMapPlacement> {
  const { perfTmp = '/tmp', euid } = options;
  const pairs = await mapsToPlace(folder, warn);
  // Identity of each placed file: inode numbers are reused at once, so the change time is compared too.
  const placed: (PlacedPerfMap & { identity: string })[] = [];
  const placement: PerfMapPlacement = {
    placed,
    async remove() {
      for (const file of placed.splice(0)) {
        const now = await identity(file.placedAt).catch(() => undefined);
        if (now === file.identity) await unlink(file.placedAt).catch(() => undefined);
      }
    },
  };
  try {
    for (const { from, pid } of pairs) {
      const placedAt = join(perfTmp, `perf-${pid}.map`);
      try {
        await copyCut(folder, from, placedAt);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException).code;
        if (code === 'EEXIST') await warnIfUnfit(folder, from, placedAt, euid, warn);
        else warn(`could not place ${from} at ${placedAt} (${code ?? String(error)}): JIT frames may stay unnamed`);
        continue;
      }
      placed.push({ from, placedAt, identity: await identity(placedAt) });
    }
  } catch (error) {
    await placement.remove();
    throw error;
  }
  return placement;
}

/** Copies `from` (no link, a regular file) to `placedAt`, lines cut to placedLineBytes. */
async function copyCut(folder: OutputFolder, from: string, placedAt: string): Promise<void> {
  const handle = await folder.lookup(from, 'file');
  try {
    const input = await openForReading(handle);
    // Never replace a file that is there, even one that appears between a check and the copy.
    const output = await createExclusive(placedAt, outputModes.privateFile).catch(async (error: unknown) => {
      await input.close();
      throw error;
    });
    const cutter = new LongLineCutter(placedLineBytes, 0);
    try {
      await pipeline(
        input.createReadStream(),
        async function* (chunks: AsyncIterable<Buffer>) {
          let read = 0;
          for await (const chunk of chunks) {
            // Past the cap the rest is dropped (whole lines only: the cut line perf would ignore anyway).
            if ((read += chunk.length) > placedMaxBytes) break;
            yield cutter.cut(chunk);
          }
          yield cutter.end();
        },
        output.createWriteStream(),
      );
    } catch (error) {
      await unlink(placedAt).catch(() => undefined);
      throw error;
    }
  } finally {
    await handle.close();
  }
}

async function identity(path: string): Promise<string> {
  const s = await lstat(path, { bigint: true });
  return `${s.dev}:${s.ino}:${s.ctimeNs}`;
}

/**
 * The folder's perf-map copies and the PID perf recorded for each: collect's snapshot (see the top of this file),
 * then copies beside perf.data, `perf-<pid>.map`, named by the PID perf recorded (as people copy /tmp's), for the
 * processes the snapshots do not cover.
 */
export async function mapsToPlace(folder: OutputFolder, warn: Warn): Promise<{ from: string; pid: number }[]> {
  const snapshots = await snapshotsToPlace(folder, warn);
  const covered = new Set(snapshots.map(({ pid }) => pid));
  const beside = (await folder.list('.'))
    .map((name) => /^perf-(\d+)\.map$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null && !covered.has(Number(m[1])))
    .map((m) => ({ from: m[0], pid: Number(m[1]) }))
    .sort((a, b) => a.pid - b.pid);
  return [...snapshots, ...beside];
}

async function snapshotsToPlace(folder: OutputFolder, warn: Warn): Promise<{ from: string; pid: number }[]> {
  const ids = await readTargetIds(folder, warn);
  if (ids) {
    const from = layout.perfMap(ids.nspid);
    const present = await folder.lookup(from, 'file').then(
      async (handle) => (await handle.close(), true),
      () => false,
    );
    return present ? [{ from, pid: ids.pid }] : [];
  }
  const names = await folder.list(layout.targetDir);
  const maps = names
    .map((name) => /^perf-(\d+)\.map$/.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ from: `${layout.targetDir}/${m[0]}`, pid: Number(m[1]) }))
    .sort((a, b) => a.pid - b.pid);
  if (maps.length > 0) {
    warn(
      `no usable ${layout.targetInfo}: placing ${maps.map((m) => m.from).join(', ')} under the same PID, which is ` +
        'right only if the target ran in perf’s PID namespace',
    );
  }
  return maps;
}

/** `{ pid, nspid }` from target.json (src/output/target-info.ts), for a folder or its path. */
export async function readTargetIds(source: OutputFolder | string, warn: Warn): Promise<TargetIds | undefined> {
  const folder = typeof source === 'string' ? await OutputFolder.open(source) : source;
  try {
    const ids = await readTargetInfo(folder, warn);
    return ids && { pid: ids.pid, nspid: ids.nspid };
  } finally {
    if (typeof source === 'string') await folder.close();
  }
}

/**
 * Says when a map found in place will not serve: perf ignores one owned by another user (unless -f), and one smaller
 * than the copy is older or another process's (a live target's map only grows). A larger one, the usual case of a
 * target still running, is the better copy: no warning.
 */
async function warnIfUnfit(
  folder: OutputFolder,
  from: string,
  placedAt: string,
  euid: number | undefined,
  warn: Warn,
): Promise<void> {
  const [ours, theirs] = await Promise.all([folder.lstat(from), stat(placedAt)]).catch(() => [undefined, undefined]);
  if (!ours || !theirs) return;
  if (euid !== undefined && theirs.uid !== euid && theirs.uid !== 0) {
    warn(
      `${placedAt} already exists, owned by uid ${theirs.uid}: perf ignores it, so JIT frames may stay unnamed ` +
        `(remove it to use ${from}, or pass --force)`,
    );
  } else if (theirs.size < ours.size) {
    warn(
      `${placedAt} already exists and is smaller than ${from} (older, or another process's): left in place, ` +
        `perf names JIT frames from it (remove it to use the copy)`,
    );
  }
}

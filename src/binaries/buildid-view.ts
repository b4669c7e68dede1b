// The build-id cache perf script reads for one folder: this machine's cache (debug files the symbols step placed,
// perf's own entries) seen through links, plus the binaries the folder keeps (target/binaries, see
// src/binaries/kept-binaries.ts) copied in where this machine's cache has no binary of that build-id. Made in a
// private temporary folder and given to perf script as PERF_BUILDID_DIR, so a folder somebody sent never writes
// into this machine's cache (a forged binary under a real build-id would mislabel later profiles here).
//
// perf's layout (perf 6.x): `<dir>/.build-id/<xx>/<rest>` links to `<dir>/<file path>/<build-id>/`, which holds
// `elf` (the binary) and maybe `debug` (its symbols). The view links every top-level entry of this machine's cache
// but `.build-id`, copies each `.build-id/<xx>/<rest>` link (relative ones then resolve through those top-level
// links), and gives a kept binary an entry of its own: its `elf`, and this machine's `debug` for it when there is one.
import { lstat, mkdir, mkdtemp, opendir, readlink, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import type { Warn } from '../diagnostics.js';
import { copyRange, openForReading, withDeadline } from '../files/bounded-read.js';
import { createExclusive, outputModes, type OutputFolder } from '../files/output-folder.js';
import { keptBinariesDefaults, readKeptIndex } from './kept-binaries.js';

export interface BuildIdView {
  /** The view's folder, for PERF_BUILDID_DIR. */
  dir: string;
  /** Kept binaries given an entry (this machine's cache had no binary of that build-id). */
  placed: number;
  remove(): Promise<void>;
}

/** Entries of this machine's cache linked at most (a cache is rarely past a few thousand). */
const maxLinkedEntries = 100_000;

/**
 * What a received folder's kept binaries may cost the view: they are copied (holes read too), so a forged index of
 * huge sparse files would otherwise hang postprocess and fill /tmp. The same bounds as collect's (kept-binaries.ts),
 * on apparent sizes, and a deadline for all the copies.
 */
export interface BuildIdViewLimits {
  maxFileBytes: number;
  maxTotalBytes: number;
  maxFiles: number;
  timeoutMs: number;
}

export const buildIdViewLimits: Readonly<BuildIdViewLimits> = Object.freeze({
  maxFileBytes: keptBinariesDefaults.maxFileBytes,
  maxTotalBytes: keptBinariesDefaults.maxTotalBytes,
  maxFiles: keptBinariesDefaults.maxFiles,
  timeoutMs: 120_000,
});

/** The view for `folder`, or undefined when it keeps no binaries (perf script then reads this machine's cache). */
export async function buildIdView(
  folder: OutputFolder,
  machineDir: string,
  warn: Warn,
  signal?: AbortSignal,
  limits: Readonly<BuildIdViewLimits> = buildIdViewLimits,
): Promise<BuildIdView | undefined> {
  const kept = await readKeptIndex(folder);
  if (kept.size === 0) return undefined;
  // The view links every top-level entry of this machine's cache, whatever its name: the folder's copies live beside
  // the view, never under a name of its, or a machine entry named like their folder would take them into that cache.
  const root = await mkdtemp(join(tmpdir(), 'profcpu-buildid-'));
  const dir = join(root, 'view');
  const keptDir = join(root, 'kept');
  const remove = () => rm(root, { recursive: true, force: true });
  try {
    await mkdir(dir, { mode: outputModes.privateFolder });
    await mkdir(keptDir, { mode: outputModes.privateFolder });
    let linked = 0;
    for (const name of await names(machineDir)) {
      if (name === '.build-id') continue;
      await symlink(join(machineDir, name), join(dir, name));
    }
    for (const prefix of await names(join(machineDir, '.build-id'))) {
      if (!/^[0-9a-f]{2}$/.test(prefix)) continue;
      await mkdir(join(dir, '.build-id', prefix), { recursive: true, mode: outputModes.privateFolder });
      for (const rest of await names(join(machineDir, '.build-id', prefix))) {
        if (linked++ >= maxLinkedEntries) break;
        const target = await readlink(join(machineDir, '.build-id', prefix, rest)).catch(() => undefined);
        if (target !== undefined) await symlink(target, join(dir, '.build-id', prefix, rest));
      }
    }
    let placed = 0;
    let copiedBytes = 0;
    const deadline = Date.now() + limits.timeoutMs;
    for (const binary of kept.values()) {
      const link = join(dir, '.build-id', binary.buildId.slice(0, 2), binary.buildId.slice(2));
      const machineEntry = join(machineDir, '.build-id', binary.buildId.slice(0, 2), binary.buildId.slice(2));
      if (await exists(join(machineEntry, 'elf'))) continue;
      const refuse = (reason: string) => warn(`${binary.path}: the folder's copy cannot be used (${reason})`);
      if (placed >= limits.maxFiles) {
        refuse(`more than ${limits.maxFiles} kept binaries`);
        continue;
      }
      const timeoutMs = deadline - Date.now();
      if (timeoutMs <= 0) {
        refuse(`the ${limits.timeoutMs / 1000} s for copying kept binaries are over`);
        continue;
      }
      const entry = join(keptDir, binary.buildId);
      await mkdir(entry, { recursive: true, mode: outputModes.privateFolder });
      try {
        copiedBytes += await withDeadline({ timeoutMs, signal }, binary.path, (live) =>
          copyKept(
            folder,
            binary.buildId,
            join(entry, 'elf'),
            limits.maxFileBytes,
            limits.maxTotalBytes - copiedBytes,
            live,
          ),
        );
      } catch (error) {
        if (signal?.aborted) throw error;
        refuse((error as Error).message);
        continue;
      }
      if (await exists(join(machineEntry, 'debug'))) await symlink(join(machineEntry, 'debug'), join(entry, 'debug'));
      await mkdir(join(dir, '.build-id', binary.buildId.slice(0, 2)), { recursive: true });
      await rm(link, { force: true });
      await symlink(entry, link);
      placed++;
    }
    return { dir, placed, remove };
  } catch (error) {
    await remove();
    throw error;
  }
}

/**
 * Copies target/binaries/<buildId> out of the folder (no links followed), never over anything; refuses a file larger
 * than `maxBytes` or than what is `left` of the run's allowance. Gives the bytes copied, holes included.
 */
async function copyKept(
  folder: OutputFolder,
  buildId: string,
  to: string,
  maxBytes: number,
  left: number,
  live: () => boolean,
): Promise<number> {
  const handle = await folder.lookup(`${layout.binaries}/${buildId}`, 'file');
  try {
    const size = handle.stat.size;
    if (size > maxBytes) throw new Error(`${size} bytes, more than the ${maxBytes} a kept binary may have`);
    if (size > left) throw new Error('the bytes allowed for the kept binaries of one folder are used up');
    const source = await openForReading(handle);
    const dest = await createExclusive(to, outputModes.privateFile);
    try {
      const { bytes } = await copyRange(source, dest, 0, size, live);
      await dest.truncate(bytes);
      return bytes;
    } finally {
      await dest.close();
      await source.close();
    }
  } finally {
    await handle.close();
  }
}

async function names(dir: string): Promise<string[]> {
  const list: string[] = [];
  try {
    for await (const entry of await opendir(dir)) list.push(entry.name);
  } catch {
    // No cache here yet.
  }
  return list;
}

async function exists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}

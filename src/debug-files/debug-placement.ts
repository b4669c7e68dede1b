// A verified debug file and the build-id it belongs to in; that file placed in perf's build-id cache out, where
// `perf script` finds it (perf looks every other debug path up inside the target's mount namespace, so this cache is
// the one place profcpu can add symbols without touching the target: FACTS.md §3). The cache's layout and entries
// are src/perf/buildid-cache.ts's; this file only puts a `debug` file into an entry (or finds one
// there already), never running perf.
import { randomBytes } from 'node:crypto';
import { copyFile, link, realpath, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { ProfcpuError } from '../error.js';
import { buildIdEntry } from '../perf/buildid-cache.js';
import { readElfFile } from '../formats/elf/elf.js';

export interface PlaceDebugFileOptions {
  /** perf's build-id cache folder (see perfBuildIdDir). */
  buildIdDir: string;
  /** Lower-case hex. */
  buildId: string;
  /** The verified debug file (its build-id is checked again here). */
  debugFile: string;
  /** The binary's path as the target sees it (`/usr/share/dotnet/.../libcoreclr.so`): names a new cache entry. */
  dsoPath: string;
}

export interface PlacedDebugFile {
  /** The `debug` file perf will read. */
  path: string;
  /** linked: hard link to profcpu's cache; copied: another filesystem; present: the same file was already there. */
  how: 'linked' | 'copied' | 'present';
}

/** Puts `debugFile` into perf's build-id cache as the debug file of `buildId`. */
export async function placeDebugFile(options: PlaceDebugFileOptions): Promise<PlacedDebugFile> {
  const { buildIdDir, buildId, debugFile, dsoPath } = options;
  if (!/^[0-9a-f]{4,128}$/.test(buildId)) throw new ProfcpuError('BAD_INPUT', `${buildId} is not a build-id`);
  const failure = (what: string, cause: unknown) =>
    new ProfcpuError('IO', `cannot add the debug file of ${buildId} to perf's build-id cache: ${what}`, {
      remedy: `Check that ${buildIdDir} is writable (it is perf's build-id cache: \`perf --buildid-dir\`, buildid.dir).`,
      cause,
    });
  const entryDir = await buildIdEntry(buildIdDir, buildId, dsoPath).catch((error: unknown) => {
    if (error instanceof ProfcpuError) throw error;
    throw failure((error as Error).message, error);
  });

  const target = join(entryDir, 'debug');
  try {
    if ((await readElfFile(target)).buildId === buildId) return { path: target, how: 'present' };
  } catch {
    // Missing or unusable: replaced below.
  }
  const temp = join(entryDir, `.debug.${randomBytes(6).toString('hex')}`);
  try {
    let how: PlacedDebugFile['how'] = 'linked';
    try {
      await link(debugFile, temp);
    } catch {
      // Another filesystem, or links not allowed: a copy costs disk space but works everywhere.
      await copyFile(debugFile, temp);
      how = 'copied';
    }
    await rename(temp, target);
    return { path: target, how };
  } catch (cause) {
    throw failure((cause as Error).message, cause);
  } finally {
    await rm(temp, { force: true });
  }
}

/**
 * The `debug` file perf's build-id cache holds for `buildId` already (placed by an earlier run, or by hand), when its
 * build-id is that one; undefined otherwise. Lets a run skip what an earlier one fetched, without asking any server.
 */
export async function placedDebugFile(buildIdDir: string, buildId: string): Promise<string | undefined> {
  if (!/^[0-9a-f]{4,128}$/.test(buildId)) return undefined;
  const path = join(buildIdDir, '.build-id', buildId.slice(0, 2), buildId.slice(2), 'debug');
  try {
    // Named as placeDebugFile names it: inside the entry, not through the index's link.
    return (await readElfFile(path)).buildId === buildId ? await realpath(path) : undefined;
  } catch {
    return undefined;
  }
}

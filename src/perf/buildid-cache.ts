// A verified debug file and the build-id it belongs to in; that file placed in perf's build-id cache out, where
// `perf script` run here (in the sidecar) finds it. perf looks every other debug path up inside the target's mount
// namespace, so this cache is the one place profcpu can add symbols without touching the target (FACTS.md §3).
//
// perf 6.1 layout: `<dir>/.build-id/<xx>/<rest>` is a symlink to `<dir>/<dso path>/<build-id>/`, which holds `elf`
// (the binary, copied by `perf record`) and, when present, `debug`, which perf prefers for symbols. `perf
// buildid-cache --add FILE.dbg` does not help once `perf record` has made the entry (checked), so profcpu writes
// `debug` into the entry itself, making the entry first when it does not exist yet (perf record then keeps it).
import { copyFile, link, lstat, mkdir, readlink, realpath, rename, rm, stat, symlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, normalize, relative } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ProfcpuError } from '../error.js';
import { readElfFile } from '../symbols/elf.js';
import { runPerf, type PerfExecOptions } from './exec.js';

/** The value of `key` in `perf config` output (`key=value` lines), if set. */
export function parsePerfConfigValue(stdout: string, key: string): string | undefined {
  for (const line of stdout.split('\n')) {
    const at = line.indexOf('=');
    if (at > 0 && line.slice(0, at).trim() === key) return line.slice(at + 1).trim() || undefined;
  }
  return undefined;
}

export interface PerfBuildIdDirOptions extends PerfExecOptions {
  /** A folder given by the user (as `perf --buildid-dir` would take): used as is. */
  explicit?: string | undefined;
  /** Home folder perf would use. Default: the current user's. */
  home?: string | undefined;
}

/**
 * The build-id cache folder perf uses here: the explicit one, else perf's configured `buildid.dir` (asked from
 * `perf config`, which reads the same files perf record and perf script do), else `$HOME/.debug`.
 */
export async function perfBuildIdDir(options: PerfBuildIdDirOptions = {}): Promise<string> {
  if (options.explicit) return options.explicit;
  const home = options.home ?? options.env?.['HOME'] ?? homedir();
  try {
    const env = { ...options.env, HOME: home };
    const { stdout } = await runPerf(['config', 'buildid.dir'], { ...options, env });
    const configured = parsePerfConfigValue(stdout, 'buildid.dir');
    if (configured) return configured.startsWith('~/') ? join(home, configured.slice(2)) : configured;
  } catch (error) {
    // Without a working perf nothing reads the cache yet; the default is where perf will look once it runs.
    if (error instanceof ProfcpuError && error.code === 'ABORTED') throw error;
  }
  return join(home, '.debug');
}

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
 * The folder of `buildId`'s entry in perf's build-id cache (where perf keeps `elf` and looks for `debug`), made when
 * there is none, named after `dsoPath` as perf would name it. Throws BAD_INPUT for a build-id or path perf would not
 * make (a path with `..` could lead out of the cache).
 */
export async function buildIdEntry(buildIdDir: string, buildId: string, dsoPath: string): Promise<string> {
  if (!/^[0-9a-f]{4,128}$/.test(buildId)) throw new ProfcpuError('BAD_INPUT', `${buildId} is not a build-id`);
  const linkPath = join(buildIdDir, '.build-id', buildId.slice(0, 2), buildId.slice(2));
  try {
    return await existingEntry(linkPath);
  } catch (cause) {
    if (cause instanceof ProfcpuError) throw cause;
    return createEntry(buildIdDir, linkPath, buildId, dsoPath);
  }
}

/** The entry folder `.build-id/xx/rest` points to; throws a plain Error when there is no usable entry. */
async function existingEntry(linkPath: string): Promise<string> {
  const info = await lstat(linkPath);
  const resolved = await realpath(linkPath).catch(async (error: unknown) => {
    // A dangling link (its entry was deleted): drop it so a fresh entry can be made.
    if (info.isSymbolicLink()) await rm(linkPath, { force: true });
    throw error;
  });
  if ((await stat(resolved)).isDirectory()) return resolved;
  throw new ProfcpuError(
    'IO',
    `perf's build-id cache entry ${linkPath} -> ${await readlink(linkPath).catch(() => '?')} is in an old layout`,
    {
      remedy: `Remove it (\`rm ${linkPath}\`) and run again; perf rebuilds its entries when it records.`,
    },
  );
}

async function createEntry(buildIdDir: string, linkPath: string, buildId: string, dsoPath: string): Promise<string> {
  const clean = normalize(dsoPath);
  if (!isAbsolute(clean) || clean.split('/').includes('..'))
    throw new ProfcpuError('BAD_INPUT', `${dsoPath} is not an absolute path`);
  // An entry named `/.build-id/...` would land inside the cache's own index of links.
  if (clean === '/.build-id' || clean.startsWith('/.build-id/'))
    throw new ProfcpuError('BAD_INPUT', `${dsoPath} would be named inside the build-id index`);
  const entryDir = join(buildIdDir, clean, buildId);
  await mkdir(entryDir, { recursive: true });
  await mkdir(dirname(linkPath), { recursive: true });
  try {
    await symlink(relative(dirname(linkPath), entryDir), linkPath);
  } catch (error) {
    // Another process (perf record, a concurrent profcpu) made the entry first: use theirs.
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return existingEntry(linkPath);
    throw error;
  }
  return entryDir;
}

export interface SampledFile {
  buildId: string;
  /** The file's path as perf recorded it (the target's view), or a pseudo name such as `[kernel.kallsyms]`. */
  path: string;
}

/** Parses `perf buildid-list` output: `<hex build-id> <path>` lines; anything else is skipped. */
export function parseBuildIdList(stdout: string): SampledFile[] {
  const files: SampledFile[] = [];
  for (const line of stdout.split('\n')) {
    const match = /^([0-9a-f]{4,128}) (.+)$/.exec(line);
    if (match) files.push({ buildId: match[1]!, path: match[2]! });
  }
  return files;
}

/** Every file with samples in `perfData`, by build-id (`perf buildid-list --with-hits`). */
export async function sampledFiles(perfData: string, options: PerfExecOptions = {}): Promise<SampledFile[]> {
  const { stdout } = await runPerf(['buildid-list', '-i', perfData, '--with-hits'], options);
  return parseBuildIdList(stdout);
}

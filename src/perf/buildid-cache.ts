// perf's build-id cache: where it is (perfBuildIdDir), its entries (buildIdEntry, made the way perf makes them), and
// which files a recording sampled (sampledFiles, through `perf buildid-list`). Putting a debug file into an entry is
// src/debug-files/debug-placement.ts's job; kept binaries reach perf script through src/binaries/buildid-view.ts.
// exec.ts (and execa with it) is imported when perf is run, not with this module: the built-in engine's postprocess
// loads this module and never runs perf.
//
// perf 6.1 layout: `<dir>/.build-id/<xx>/<rest>` is a symlink to `<dir>/<dso path>/<build-id>/`, which holds `elf`
// (the binary) and, when present, `debug`, which perf prefers for symbols. `perf buildid-cache --add FILE.dbg` does
// not help once `perf record` has made the entry (checked), so profcpu writes `debug` into the entry itself, making
// the entry first when it does not exist yet (perf record then keeps it).
import { lstat, mkdir, readlink, realpath, rm, stat, symlink } from 'node:fs/promises';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, normalize, relative } from 'node:path';
import { ProfcpuError } from '../error.js';
import type { PerfExecOptions } from './exec.js';

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
  const { runPerf } = await import('./exec.js');
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
  const { runPerf } = await import('./exec.js');
  const { stdout } = await runPerf(['buildid-list', '-i', perfData, '--with-hits'], options);
  return parseBuildIdList(stdout);
}

// The machine's `dotnet`, for the demo's .NET workload. Takes PATH and DOTNET_ROOT; gives the host (the first
// `dotnet` on PATH, else $DOTNET_ROOT/dotnet), what it holds (the SDK it would build with, the .NET runtimes it runs,
// its targeting packs), and, pure, the newest target framework of .NET 8 or later that it can both build and run.
// Only the two places a user sets count: a runtime in a default folder off PATH is not looked for.
import { execa } from 'execa';
import { readdir, realpath } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { executableOnPath, isExecutableFile } from '../files/executables.js';

export type Environment = Readonly<Record<string, string | undefined>>;

export interface DotnetHost {
  /** The `dotnet` executable as found. */
  path: string;
  /** The folder it lives in once links are resolved: holds sdk/, shared/ and packs/. */
  root: string;
  /** Where it was found. */
  foundIn: 'PATH' | 'DOTNET_ROOT';
}

export interface DotnetInstall {
  /** The SDK `dotnet build` would use (`dotnet --version`), or undefined when there is none (a runtime only). */
  sdkVersion: string | undefined;
  /** The versions of Microsoft.NETCore.App it can run, e.g. `10.0.12`. */
  runtimes: string[];
  /** The versions of the Microsoft.NETCore.App targeting packs in its packs/ folder. */
  targetingPacks: string[];
}

/** The oldest .NET the demo workload is built for: the oldest whose diagnostic IPC switches the perf map on. */
export const oldestDemoDotnet = 8;

/** The first executable `dotnet` on PATH, else $DOTNET_ROOT/dotnet, else undefined. */
export async function findDotnetHost(env: Environment): Promise<DotnetHost | undefined> {
  const onPath = await executableOnPath('dotnet', env, { absoluteOnly: true });
  if (onPath !== undefined) return { path: onPath, root: dirname(await realpath(onPath)), foundIn: 'PATH' };
  const root = env['DOTNET_ROOT'];
  if (!root?.startsWith('/')) return undefined;
  const path = join(root, 'dotnet');
  if (!(await isExecutableFile(path))) return undefined;
  return { path, root: dirname(await realpath(path)), foundIn: 'DOTNET_ROOT' };
}

/** Asks the host for its SDK and runtimes, and reads its packs folder. `cwd` decides which global.json applies. */
export async function inspectDotnetHost(
  host: DotnetHost,
  options: { env: Environment; cwd: string; signal?: AbortSignal },
): Promise<DotnetInstall> {
  const run = (args: string[]) =>
    execa(host.path, args, {
      env: { ...options.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' },
      extendEnv: false,
      cwd: options.cwd,
      reject: false,
      timeout: 60_000,
      ...(options.signal && { cancelSignal: options.signal }),
    });
  // Without an SDK, `dotnet --version` fails ("No .NET SDKs were found").
  const [version, runtimes] = await Promise.all([run(['--version']), run(['--list-runtimes'])]);
  const sdkVersion = version.exitCode === 0 ? /^\d+\.\d+\.\S+$/m.exec(String(version.stdout))?.[0] : undefined;
  const packs = await readdir(join(host.root, 'packs', 'Microsoft.NETCore.App.Ref')).catch(() => [] as string[]);
  return {
    sdkVersion,
    runtimes: runtimesIn(runtimes.exitCode === 0 ? String(runtimes.stdout) : ''),
    targetingPacks: packs.filter((name) => /^\d+\.\d+\./.test(name)),
  };
}

/** The Microsoft.NETCore.App versions in `dotnet --list-runtimes` output. Pure. */
export function runtimesIn(listRuntimes: string): string[] {
  return [...listRuntimes.matchAll(/^Microsoft\.NETCore\.App (\d+\.\d+\.\S+) /gm)].map((m) => m[1]!);
}

const major = (version: string) => Number(/^(\d+)\./.exec(version)?.[1] ?? NaN);

/**
 * The newest `netN.0` (N ≥ 8) that the install can build and run: a runtime of that major version, an SDK at least
 * as new, and its targeting pack (the SDK carries its own version's; an older one must be in packs/, as there may be
 * no network to fetch it). Undefined when there is none. Pure.
 */
export function chooseTargetFramework(install: DotnetInstall): string | undefined {
  if (install.sdkVersion === undefined) return undefined;
  const sdkMajor = major(install.sdkVersion);
  const packs = new Set(install.targetingPacks.map(major));
  const runnable = [...new Set(install.runtimes.map(major))]
    .filter((n) => n >= oldestDemoDotnet && n <= sdkMajor && (n === sdkMajor || packs.has(n)))
    .sort((a, b) => b - a);
  return runnable.length ? `net${runnable[0]}.0` : undefined;
}

// The .NET fixture app (test/fixtures/dotnet-app) for tests: `buildDotnetApp(version)` builds it with the machine's
// SDK once per .NET version and source version into a cache folder outside the repository and gives the
// executable's path; `startDotnetApp({ env, version })` starts it and resolves once it printed "ready", giving
// { pid, kill() }. .NET 10 (the default) is a plain build on the SDK's own shared framework, built with no network;
// .NET 8 and 9 are published self-contained for linux-x64 (the runtime, libcoreclr.so and System.Private.CoreLib in
// the app's folder), with the runtime packs the SDK picks restored from NuGet on the first build.
// Tests check for the SDK first: `needDotnet(t)`.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, realpathSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIntoCache, sourceHash } from './build-cache.js';

export const dotnetAppSource = fileURLToPath(new URL('../fixtures/dotnet-app', import.meta.url));

/** Where built fixtures are kept between runs; `PROFCPU_TEST_CACHE` overrides. */
export const testCacheDir = process.env['PROFCPU_TEST_CACHE'] ?? join(tmpdir(), 'profcpu-test-cache');

/** The .NET versions the fixture is built for. */
/** The environment of a quiet, one-off `dotnet build` or `publish`: no telemetry, banner or lingering build nodes. */
export function dotnetBuildEnv(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    DOTNET_CLI_TELEMETRY_OPTOUT: '1',
    DOTNET_NOLOGO: '1',
    DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1',
    MSBUILDDISABLENODEREUSE: '1',
  };
}

export type DotnetVersion = 8 | 9 | 10;
export const dotnetVersions: readonly DotnetVersion[] = [8, 9, 10];

/** Where the runtime packs of .NET 8 and 9 come from (the fixture's NuGet.config clears every source). */
const nugetSource = process.env['PROFCPU_TEST_NUGET_SOURCE'] ?? 'https://api.nuget.org/v3/index.json';

/** The workloads the app knows (see its README). */
export type DotnetAppWorkload = 'generic' | 'async' | 'linq' | 'alloc' | 'waits';

export interface DotnetAppOptions {
  /** Which .NET the app runs on (default 10, the SDK's shared framework; 8 and 9 are self-contained). */
  version?: DotnetVersion;
  /** Added to the test's environment; `undefined` removes a variable. DOTNET_PerfMap* are removed unless given. */
  env?: Record<string, string | undefined>;
  /** Exit by itself after this many seconds (default: run until killed). */
  seconds?: number;
  /** Which workloads run, each on its own thread (default: all). */
  workloads?: readonly DotnetAppWorkload[];
  /** Idle after the first round and burn only while this file exists (--burn-while; default: always burn). */
  burnWhile?: string;
  /** How long to wait for "ready" (default 60 s, the first start after a build is the slowest). */
  readyTimeoutMs?: number;
  /**
   * Starts the app through another command (e.g. `unshare` for namespaces): given the executable and its arguments,
   * returns the command line to run. The app's own pid is then found among that command's descendants.
   */
  wrap?: (executable: string, args: readonly string[]) => readonly string[];
}

export interface DotnetApp {
  /** The app's pid as this test sees it (not the wrapper's). */
  readonly pid: number;
  /** The pid the app printed, i.e. in its own PID namespace. */
  readonly nspid: number;
  readonly executable: string;
  readonly child: ChildProcess;
  /** Everything the app wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the exit code (or null after a signal) when the app exits. */
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after 5 s; resolves once the app is gone. Safe to call twice. */
  kill(): Promise<void>;
}

const execFileAsync = promisify(execFile);
const built = new Map<DotnetVersion, Promise<string>>();

/**
 * Builds the fixture for one .NET version (once per test process, reused across processes while the sources are
 * unchanged) and gives the executable's path; for 8 and 9 its folder also holds the runtime.
 */
export function buildDotnetApp(version: DotnetVersion = 10): Promise<string> {
  let build = built.get(version);
  if (!build) built.set(version, (build = buildOnce(version)));
  return build;
}

async function buildOnce(version: DotnetVersion): Promise<string> {
  // .NET 10 keeps the folder name it always had, so existing caches stay valid.
  const name = version === 10 ? 'dotnet-app' : `dotnet-app-net${version}`;
  const finalDir = join(testCacheDir, `${name}-${await sourceHash(dotnetAppSource, /\.(cs|csproj|config)$/)}`);
  const executable =
    version === 10
      ? join(finalDir, 'bin', 'ProfcpuFixture', 'release', 'ProfcpuFixture')
      : join(finalDir, 'publish', 'ProfcpuFixture', 'release_linux-x64', 'ProfcpuFixture');
  return buildIntoCache({ finalDir, executable, build: (workDir) => build(version, workDir) });
}

async function build(version: DotnetVersion, workDir: string): Promise<void> {
  try {
    const project = join(dotnetAppSource, 'ProfcpuFixture.csproj');
    const common = ['-c', 'Release', '--artifacts-path', workDir, '-nodeReuse:false', '-p:UseSharedCompilation=false'];
    const selfContained = [
      `-p:FixtureDotnet=${version}`,
      '-r',
      'linux-x64',
      '--self-contained',
      '--source',
      nugetSource,
    ];
    await execFileAsync(
      'dotnet',
      version === 10 ? ['build', project, ...common] : ['publish', project, ...common, ...selfContained],
      {
        env: dotnetBuildEnv(),
        maxBuffer: 16 << 20,
      },
    );
  } catch (error) {
    const out = (error as { stdout?: string }).stdout ?? '';
    const hint = version === 10 ? '' : ` (.NET ${version}'s runtime packs come from NuGet at ${nugetSource})`;
    throw new Error(`building the .NET ${version} fixture failed${hint}:\n${out.slice(-4000)}`, { cause: error });
  }
}

/** Starts the fixture and waits for "ready". Call `kill()` when done (e.g. in `t.after`). */
export async function startDotnetApp(options: DotnetAppOptions = {}): Promise<DotnetApp> {
  const executable = await buildDotnetApp(options.version);
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (value !== undefined && !/^(DOTNET|COMPlus)_PerfMap/i.test(key)) env[key] = value;
  }
  for (const [key, value] of Object.entries(options.env ?? {})) {
    if (value === undefined) delete env[key];
    else env[key] = value;
  }
  const args: string[] = [];
  if (options.seconds !== undefined) args.push('--seconds', String(options.seconds));
  if (options.workloads) args.push('--workloads', options.workloads.join(','));
  if (options.burnWhile !== undefined) args.push('--burn-while', options.burnWhile);

  const [command, ...commandArgs] = options.wrap ? options.wrap(executable, args) : [executable, ...args];
  const child = spawn(command!, commandArgs, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const spawned = new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  await spawned;

  // Known once the app said "ready"; until then kill() signals the direct child.
  let appPid: number | undefined = undefined;
  const kill = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    // The app itself, not a wrapper (`unshare --fork` ignores SIGTERM). As PID 1 of a namespace the runtime's
    // re-raised SIGTERM is ignored, so a wrapped app gets SIGKILL at once.
    signal(appPid ?? child.pid!, options.wrap && appPid !== undefined ? 'SIGKILL' : 'SIGTERM');
    const timer = setTimeout(() => {
      if (appPid !== undefined) signal(appPid, 'SIGKILL');
      child.kill('SIGKILL');
    }, 5000);
    await exited;
    clearTimeout(timer);
  };

  const timeoutMs = options.readyTimeoutMs ?? 60_000;
  const nspid = await new Promise<number>((resolve, reject) => {
    const check = (): void => {
      const match = /^(\d+)\n(?:.*\n)*?ready\n/.exec(text);
      if (match) finish(() => resolve(Number(match[1])));
    };
    const onExit = (): void =>
      finish(() => reject(new Error(`the .NET fixture exited before "ready"; its output:\n${text}`)));
    const timer = setTimeout(
      () => finish(() => reject(new Error(`the .NET fixture printed no "ready" within ${timeoutMs} ms:\n${text}`))),
      timeoutMs,
    );
    const finish = (settle: () => void): void => {
      clearTimeout(timer);
      child.stdout.off('data', check);
      child.off('close', onExit);
      settle();
    };
    child.stdout.on('data', check);
    child.once('close', onExit);
    check();
  }).catch(async (error: unknown) => {
    await kill();
    throw error;
  });

  appPid = options.wrap ? await findDescendant(child.pid!, 'ProfcpuFixture') : child.pid!;
  if (appPid === undefined) {
    await kill();
    throw new Error(`the .NET fixture said "ready" but is not among the descendants of ${child.pid}`);
  }
  return { pid: appPid, nspid, executable, child, output: () => text, exited, kill };
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // Already gone.
  }
}

/** The first descendant of `pid` (breadth first) whose comm is `comm`. */
async function findDescendant(pid: number, comm: string): Promise<number | undefined> {
  const queue = [pid];
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const name = await readFile(`/proc/${next}/comm`, 'utf8').catch(() => '');
    if (name.trim() === comm) return next;
    const tasks = await readdir(`/proc/${next}/task`).catch(() => [] as string[]);
    for (const task of tasks) {
      const children = await readFile(`/proc/${next}/task/${task}/children`, 'utf8').catch(() => '');
      queue.push(...children.split(/\s+/).filter(Boolean).map(Number));
    }
  }
  return undefined;
}

/**
 * The folder holding the runtime (libcoreclr.so, System.Private.CoreLib.dll...) the fixture built for `version` runs
 * on: the app's own folder for a self-contained 8 or 9, the SDK's newest shared framework for 10 (or undefined).
 */
export async function dotnetRuntimeFolder(version: DotnetVersion = 10): Promise<string | undefined> {
  return version === 10 ? sharedFramework() : dirname(await buildDotnetApp(version));
}

/** The newest shared framework of the `dotnet` on PATH, or undefined. */
export function sharedFramework(): string | undefined {
  for (const entry of (process.env['PATH'] ?? '').split(':')) {
    let dotnet: string;
    try {
      dotnet = realpathSync(join(entry, 'dotnet'));
    } catch {
      continue;
    }
    const dir = join(dirname(dotnet), 'shared', 'Microsoft.NETCore.App');
    const versions = existsSync(dir) ? readdirSync(dir).sort() : [];
    if (versions.length) return join(dir, versions.at(-1)!);
  }
  return undefined;
}

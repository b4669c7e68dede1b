// The demo's .NET workload (the C# project in src/collect/dotnet-demo/, shipped with the package): built on first use with the
// machine's SDK into a cache folder keyed by the project's content, the SDK version and the target framework, so
// later demos reuse it; then started with no perf map setting of its own (profcpu switches the perf map on over the
// diagnostic socket) and awaited until it printed "ready". Takes the host, the cache folder and the environment;
// gives the build and a running workload's PID with a stop function.
import { execa } from 'execa';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ProfcpuError } from '../error.js';
import type { DemoWorkload } from './demo.js';
import type { DotnetHost, Environment } from './dotnet-host.js';

/**
 * The project's sources, beside this module's TypeScript (package.json's "files" ships the folder): found from dist/
 * and from src/ alike, both two levels below the package's root. Not under assets/, which `npm run build` writes and
 * git ignores.
 */
export const demoDotnetSource = fileURLToPath(new URL('../../src/collect/dotnet-demo/', import.meta.url));

/** The executable's name (the project's AssemblyName), which is also the process's comm. */
export const demoDotnetName = 'ProfcpuDemo';

/** The cache folder: `$XDG_CACHE_HOME/profcpu/demo`, else `~/.cache/profcpu/demo`. */
export function defaultDemoCacheDir(env: Environment, home = homedir()): string {
  const xdg = env['XDG_CACHE_HOME'];
  return join(xdg && xdg.startsWith('/') ? xdg : join(home, '.cache'), 'profcpu', 'demo');
}

export interface DotnetDemoBuildOptions {
  host: DotnetHost;
  sdkVersion: string;
  /** e.g. `net10.0` (see chooseTargetFramework). */
  framework: string;
  /** Where builds are kept, one folder each. Default: none; the CLI passes defaultDemoCacheDir. */
  cacheDir: string;
  /** The environment `dotnet build` runs in (telemetry, logo and build servers are turned off on top of it). */
  env: Environment;
  /** Called once a build is needed, before it starts (not when the cache has one). */
  onBuild?: () => void;
  /** The project's folder. Default demoDotnetSource. */
  sourceDir?: string;
  signal?: AbortSignal;
}

export interface DotnetDemoBuild {
  /** The apphost executable. */
  executable: string;
  /** The build's folder in the cache. */
  dir: string;
  /** False when the cache already held it. */
  built: boolean;
  /** How long the build took, in ms (0 when cached). */
  buildMs: number;
}

/** The files whose content decides the build: sources, project and NuGet settings. */
async function projectFiles(sourceDir: string): Promise<string[]> {
  return (await readdir(sourceDir)).filter((name) => /\.(cs|csproj|config)$/.test(name)).sort();
}

/** The cache key: the project's files (names and content), the SDK version and the target framework. */
async function buildKey(sourceDir: string, sdkVersion: string, framework: string): Promise<string> {
  const hash = createHash('sha256').update(`${sdkVersion}\0${framework}\0`);
  for (const name of await projectFiles(sourceDir))
    hash
      .update(name)
      .update('\0')
      .update(await readFile(join(sourceDir, name)))
      .update('\0');
  return hash.digest('hex').slice(0, 16);
}

/** Gives the cached build of the workload, building it first when there is none. */
export async function buildDotnetDemo(options: DotnetDemoBuildOptions): Promise<DotnetDemoBuild> {
  const sourceDir = options.sourceDir ?? demoDotnetSource;
  const key = await buildKey(sourceDir, options.sdkVersion, options.framework);
  const dir = join(options.cacheDir, `${demoDotnetName}-${options.framework}-${key}`);
  const executable = join(dir, 'out', demoDotnetName);
  if (existsSync(executable)) return { executable, dir, built: false, buildMs: 0 };

  options.onBuild?.();
  const started = Date.now();
  // Built aside, then renamed: a demo running alongside never sees half a build, and a failed one leaves none.
  const work = `${dir}.building-${randomBytes(4).toString('hex')}`;
  const cacheError = (cause: unknown) =>
    new ProfcpuError('IO', `cannot write the .NET demo workload's build folder ${work}: ${String(cause)}`, {
      cause,
      remedy: 'Point XDG_CACHE_HOME at a writable folder, or run `profcpu demo --workload node`.',
    });
  await mkdir(work, { recursive: true }).catch((cause: unknown) => {
    throw cacheError(cause);
  });
  try {
    // A copy of the project, since the package's folder may be read-only and `dotnet build` writes obj/ beside it.
    for (const name of await projectFiles(sourceDir)) await cp(join(sourceDir, name), join(work, name));
    const result = await execa(
      options.host.path,
      [
        'build',
        join(work, `${demoDotnetName}.csproj`),
        '-c',
        'Release',
        `-p:TargetFramework=${options.framework}`,
        '-o',
        join(work, 'out'),
        // No build server left running after the demo.
        '-nodeReuse:false',
        '-p:UseSharedCompilation=false',
      ],
      {
        env: {
          ...options.env,
          DOTNET_CLI_TELEMETRY_OPTOUT: '1',
          DOTNET_NOLOGO: '1',
          DOTNET_SKIP_FIRST_TIME_EXPERIENCE: '1',
          MSBUILDDISABLENODEREUSE: '1',
        },
        extendEnv: false,
        cwd: work,
        all: true,
        reject: false,
        timeout: 10 * 60_000,
        ...(options.signal && { cancelSignal: options.signal }),
      },
    );
    if (result.exitCode !== 0 || !existsSync(join(work, 'out', demoDotnetName))) {
      throw await buildFailure(options, String(result.all ?? result.message), result.exitCode);
    }
    await rename(work, dir).catch(async (cause: unknown) => {
      // Another demo finished the same build first.
      if (!existsSync(executable)) throw cacheError(cause);
    });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return { executable, dir, built: true, buildMs: Date.now() - started };
}

/** The build's failure: its error lines in the message, its whole output kept in the cache folder. */
async function buildFailure(
  options: DotnetDemoBuildOptions,
  output: string,
  exitCode: number | undefined,
): Promise<ProfcpuError> {
  const log = join(options.cacheDir, 'last-failed-build.log');
  const kept = await writeFile(log, output).then(
    () => true,
    () => false,
  );
  const errors = [...new Set(output.split('\n').filter((line) => /\berror\b/i.test(line)))].map((line) => line.trim());
  const shown = (errors.length ? errors : output.trim().split('\n')).slice(-5).join(' | ');
  return new ProfcpuError(
    'BUILD_FAILED',
    `building the .NET demo workload with ${options.host.path} (SDK ${options.sdkVersion}, ${options.framework}) ` +
      `failed${exitCode === undefined ? '' : ` with exit code ${exitCode}`}: ${shown}`,
    {
      remedy:
        `${kept ? `Read the build's output in ${log}. ` : ''}The project needs no NuGet package: check that ` +
        '`dotnet new console && dotnet build` works here, or run `profcpu demo --workload node`.',
    },
  );
}

export interface DotnetDemoStartOptions {
  build: DotnetDemoBuild;
  host: DotnetHost;
  /** The environment it runs in, less any perf map or diagnostics setting (the demo shows profcpu's). */
  env: Environment;
  /** The workload exits by itself after this many seconds. */
  lifetimeSeconds: number;
  /** How long to wait for "ready", in ms. Default 60 s (a first start on a busy machine). */
  readyTimeoutMs?: number;
}

/** Variables that would write the perf map without profcpu, or close the diagnostic socket profcpu asks through. */
const droppedVariable = /^(DOTNET|COMPlus)_(PerfMap|EnableDiagnostics)/i;

/** Starts the built workload and resolves once it printed "ready" (every method ran once). */
export async function startDotnetDemo(options: DotnetDemoStartOptions): Promise<DemoWorkload> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.env))
    if (value !== undefined && !droppedVariable.test(name)) env[name] = value;
  // The apphost finds the runtime of the `dotnet` that built it.
  env['DOTNET_ROOT'] = options.host.root;
  const child = execa(options.build.executable, [String(options.lifetimeSeconds)], {
    env,
    extendEnv: false,
    stdin: 'ignore',
    stdout: 'pipe',
    stderr: 'pipe',
    all: true,
    buffer: false,
    reject: false,
    // SIGKILL when SIGTERM did not end it within 5 s.
    forceKillAfterDelay: 5000,
  });
  let output = '';
  child.all?.setEncoding('utf8').on('data', (chunk: string) => {
    // Enough to show why it did not start; the rest is discarded.
    if (output.length < 16_384) output += chunk;
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    await child;
  };
  const pid = child.pid;
  const timeoutMs = options.readyTimeoutMs ?? 60_000;
  const ready = await new Promise<boolean>((resolve) => {
    const timer = setTimeout(() => resolve(false), timeoutMs);
    const check = () => {
      if (/^ready$/m.test(output)) finish(true);
    };
    const finish = (ok: boolean) => {
      clearTimeout(timer);
      child.all?.off('data', check);
      resolve(ok);
    };
    child.all?.on('data', check);
    void child.then(() => finish(false));
    check();
  });
  if (!ready || pid === undefined) {
    await stop();
    throw new ProfcpuError(
      'IO',
      `the .NET demo workload (${options.build.executable}) did not start: ${output.trim() || 'it printed nothing'}`,
      {
        remedy: `Check that it runs by itself: DOTNET_ROOT=${options.host.root} ${options.build.executable} 5`,
      },
    );
  }
  return { pid, stop };
}

// Which workload `profcpu demo` profiles, and starting it: `--workload dotnet` the .NET one (built on first use),
// `node` the Node.js one, `auto` (the default) the .NET one when a `dotnet` with an SDK is on PATH or in DOTNET_ROOT,
// else the Node.js one, with a warning when .NET was there but could not be used. Takes the choice, the environment
// and the cache folder; gives a running workload, what to call it, and a report for the manifest.
import { isProfcpuError, ProfcpuError } from '../error.js';
import type { StepReport } from '../step/step.js';
import { startDemoWorkload, type DemoWorkload } from './demo.js';
import { buildDotnetDemo, startDotnetDemo } from './demo-dotnet.js';
import {
  chooseTargetFramework,
  findDotnetHost,
  inspectDotnetHost,
  oldestDemoDotnet,
  type Environment,
} from './dotnet-host.js';

export const demoWorkloadChoices = Object.freeze(['auto', 'dotnet', 'node'] as const);
export type DemoWorkloadChoice = (typeof demoWorkloadChoices)[number];

export interface DemoOptions {
  /** Which workload; default `auto`. */
  workload: DemoWorkloadChoice;
  /** The node executable for the Node.js workload (the CLI passes its own). */
  nodePath: string;
  /** The workload stops by itself after this many seconds, should nobody stop it. */
  lifetimeSeconds: number;
  /** PATH and DOTNET_ROOT find `dotnet`; the .NET build and workload run in it. */
  env: Environment;
  /** Where the .NET workload's builds are kept (defaultDemoCacheDir). */
  cacheDir: string;
  /** Progress lines (the build's). */
  progress: (message: string) => void;
  /** The one line saying why `auto` fell back to Node.js. */
  warn: (message: string) => void;
  signal?: AbortSignal;
}

export const demoDefaults = Object.freeze({ workload: 'auto' as DemoWorkloadChoice });

export interface StartedDemo extends DemoWorkload {
  kind: 'dotnet' | 'node';
  /** How to name it: `the .NET demo workload`. */
  title: string;
  /** What it runs on, or why it was chosen: `net10.0, SDK 10.0.401`; `no \`dotnet\` on PATH or in DOTNET_ROOT`. */
  details: string;
  /** For the manifest, under `collect.steps.demoWorkload`. */
  report: StepReport;
}

/** Starts the chosen workload; with `auto`, falls back to Node.js when .NET is missing or cannot be built. */
export async function startDemo(options: DemoOptions): Promise<StartedDemo> {
  if (options.workload === 'node') return startNode(options, '--workload node');
  try {
    return await startDotnet(options);
  } catch (error) {
    if (!(error instanceof DotnetUnusable)) throw error;
    if (options.workload === 'dotnet') throw error.cause;
    if (!error.quiet) {
      const fix = error.cause.code === 'BUILD_FAILED' && error.cause.remedy ? ` (fix: ${error.cause.remedy})` : '';
      options.warn(`${error.message}; profiling the Node.js demo workload instead${fix}`);
    }
    return startNode(options, error.message);
  }
}

/** Why the .NET workload cannot run here; `quiet` when there is simply no .NET (auto says so without a warning). */
class DotnetUnusable extends Error {
  constructor(
    message: string,
    override readonly cause: ProfcpuError,
    readonly quiet = false,
  ) {
    super(message);
  }
}

async function startNode(options: DemoOptions, reason: string): Promise<StartedDemo> {
  const workload = await startDemoWorkload({ nodePath: options.nodePath, lifetimeSeconds: options.lifetimeSeconds });
  return {
    ...workload,
    kind: 'node',
    title: 'the Node.js demo workload',
    details: reason,
    report: { workload: 'node', chosen: options.workload, reason },
  };
}

const remedy = `Install the .NET SDK ${oldestDemoDotnet} or later and put \`dotnet\` on PATH (or set DOTNET_ROOT), or run \`profcpu demo --workload node\`.`;

async function startDotnet(options: DemoOptions): Promise<StartedDemo> {
  const host = await findDotnetHost(options.env);
  if (host === undefined) {
    const message = 'no `dotnet` on PATH or in DOTNET_ROOT';
    throw new DotnetUnusable(
      message,
      new ProfcpuError('NO_DOTNET_SDK', `${message} to build the demo with`, { remedy }),
      true,
    );
  }
  const install = await inspectDotnetHost(host, {
    env: options.env,
    cwd: '/',
    ...(options.signal && { signal: options.signal }),
  });
  const framework = chooseTargetFramework(install);
  if (install.sdkVersion === undefined || framework === undefined) {
    const message =
      install.sdkVersion === undefined
        ? `${host.path} has a .NET runtime (${install.runtimes.join(', ') || 'none listed'}) but no SDK to build the .NET demo workload with`
        : `${host.path} (SDK ${install.sdkVersion}) has no runtime of .NET ${oldestDemoDotnet} or later it can build for (runtimes: ${install.runtimes.join(', ') || 'none'})`;
    throw new DotnetUnusable(message, new ProfcpuError('NO_DOTNET_SDK', message, { remedy }));
  }
  const build = await buildDotnetDemo({
    host,
    sdkVersion: install.sdkVersion,
    framework,
    cacheDir: options.cacheDir,
    env: options.env,
    onBuild: () => options.progress('building the .NET demo workload (first run only)…'),
    ...(options.signal && { signal: options.signal }),
  }).catch((error: unknown) => {
    if (isProfcpuError(error, 'BUILD_FAILED')) throw new DotnetUnusable(error.message, error);
    throw error;
  });
  if (build.built) options.progress(`built the .NET demo workload in ${(build.buildMs / 1000).toFixed(1)} s`);
  const workload = await startDotnetDemo({ build, host, env: options.env, lifetimeSeconds: options.lifetimeSeconds });
  return {
    ...workload,
    kind: 'dotnet',
    title: 'the .NET demo workload',
    details: `${framework}, SDK ${install.sdkVersion}`,
    report: {
      workload: 'dotnet',
      chosen: options.workload,
      framework,
      sdkVersion: install.sdkVersion,
      dotnet: host.path,
      executable: build.executable,
      built: build.built,
      ...(build.built && { buildSeconds: Math.round(build.buildMs / 100) / 10 }),
    },
  };
}

// The naming tests' and `npm run bench naming`'s recording: the .NET fixture app as PID 1 of its own PID and mount
// namespace (private /tmp: its perf map, jitdump and diagnostic socket exist only there), recorded by the built CLI
// from a sidecar that joins its PID namespace (test/support/namespaces.ts). Gives the output folder and what is needed
// to assert on it. Needs root, perf, unshare and the .NET SDK (callers check).
import { cp, mkdtemp, readdir, readFile } from 'node:fs/promises';
import { dirname, join, basename } from 'node:path';
import { layout } from '../../src/output/layout.js';
import { buildDotnetApp, type DotnetVersion } from '../support/dotnet-app.js';
import { runCliInSidecar, startNamespacedTarget, type NamespacedTarget } from '../support/namespaces.js';

export interface SidecarRecordingOptions {
  /** Which .NET the fixture runs on (default 10; 8 and 9 are self-contained, their runtime in the app's folder). */
  version?: DotnetVersion;
  /** Added to the app's environment (DOTNET_PerfMap* are removed unless given here). */
  env?: Record<string, string>;
  /** Seconds to record. Default 6. */
  seconds?: number;
  /** More collect arguments (e.g. `--perfmap off`). */
  args?: readonly string[];
  /** A folder outside /tmp (the namespaces mount their own /tmp) that holds the app copy and the output. */
  work: string;
  /** Another .NET app to record instead of the fixture: its executable (outside /tmp, run in place) and arguments. */
  app?: { executable: string; args?: readonly string[] };
  /** Called once the target is up, before its warm-up (e.g. to start a load generator); awaited. */
  started?: (target: NamespacedTarget) => Promise<void>;
}

export interface SidecarRecording {
  /** The output folder. */
  dir: string;
  /** The collect command as run in the sidecar, for messages and the benchmark. */
  argv: string[];
  /** collect's exit code and combined output. */
  exitCode: number | undefined;
  output: string;
  target: NamespacedTarget;
}

/** Copies the built fixture under `work` (the target's /tmp is a fresh tmpfs, so the build cache there is hidden). */
async function appOutsideTmp(work: string, version: DotnetVersion | undefined): Promise<string> {
  const executable = await buildDotnetApp(version);
  const copy = join(work, 'app');
  await cp(dirname(executable), copy, { recursive: true });
  return join(copy, basename(executable));
}

/** Starts the fixture in its namespaces, waits until it is busy, records it from a sidecar. Kill `target` after. */
export async function recordFixtureFromSidecar(options: SidecarRecordingOptions): Promise<SidecarRecording> {
  const executable = options.app?.executable ?? (await appOutsideTmp(options.work, options.version));
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!/^(DOTNET|COMPlus)_PerfMap/i.test(key)) env[key] = value;
  Object.assign(env, options.env);
  const target = await startNamespacedTarget(executable, options.app?.args ?? [], {
    env,
    // Ready once the app's diagnostic socket exists in its /tmp: the runtime is up and its workloads are starting.
    ready: async ({ hostPid }) => {
      const tmp = await readdir(`/proc/${hostPid}/root/tmp`).catch(() => [] as string[]);
      return tmp.some((name) => name.startsWith('dotnet-diagnostic-'));
    },
    readyTimeoutMs: 60_000,
  });
  try {
    await options.started?.(target);
  } catch (error) {
    await target.kill();
    throw error;
  }
  // Let every workload thread warm up (the app prints "ready" on a stdout the namespace helper does not keep).
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const dir = join(options.work, 'out');
  const argv = [
    'collect',
    '--pid',
    '1',
    '--duration',
    String(options.seconds ?? 6),
    '--output',
    dir,
    ...(options.args ?? []),
  ];
  const run = await runCliInSidecar(target.hostPid, argv, { cwd: options.work });
  return { dir, argv, exitCode: run.exitCode, output: String(run.all), target };
}

/** A fresh work folder outside /tmp. */
export function sidecarWorkDir(): Promise<string> {
  return mkdtemp('/var/tmp/profcpu-naming-');
}

export interface NamingManifest {
  samples: number;
  fullyNamed: number;
  fullyNamedExceptCoreclr: number;
  framesByKind: Record<string, number>;
  dotnet?: {
    sources: { jitDump?: { readyToRun: number }; readyToRun?: { images: number; methods: number } };
    resolved: { jit: number; readytorun: number; readytorunFromImage?: number };
  };
}

/** manifest.json's `naming`, perf-map and runtime-stubs step reports, target.json and folded_stacks.out of an output folder. */
export async function readOutputs(dir: string) {
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    naming: NamingManifest;
    collect?: { steps?: { perfMap?: Record<string, unknown>; 'runtime-stubs'?: Record<string, unknown> } };
  };
  const target = JSON.parse(await readFile(join(dir, layout.targetInfo), 'utf8')) as {
    dotnet?: { writeXorExecute?: boolean; version?: string };
  };
  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  // The perf-map step's reports before and after recording, merged as collect writes them.
  return {
    naming: manifest.naming,
    target,
    folded,
    perfMapStep: manifest.collect?.steps?.perfMap,
    stubsStep: manifest.collect?.steps?.['runtime-stubs'],
  };
}

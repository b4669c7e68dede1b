// The demo's workload as a child process: starts dist/collect/demo-workload.js under `node --perf-basic-prof` and
// resolves once its perf map exists (so the first samples already have names), giving its PID and a stop function.
import { execa } from 'execa';
import { stat } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import { ProfcpuError } from '../error.js';

export const demoWorkloadPath = fileURLToPath(new URL('./demo-workload.js', import.meta.url));

/**
 * node's flags for a perf map: /tmp/perf-<pid>.map. With --perf-basic-prof, V8 also writes an `isolate-*-v8.log`
 * into the working directory; sending that log to stdout (which the workload discards) keeps the user's folder clean.
 */
export const nodePerfMapFlags: readonly string[] = Object.freeze([
  '--perf-basic-prof',
  '--no-logfile-per-isolate',
  '--logfile=-',
]);

export interface DemoWorkloadOptions {
  /** The node executable (the CLI passes its own). */
  nodePath: string;
  /** The workload stops by itself after this many seconds, should nobody stop it. */
  lifetimeSeconds: number;
  /** How long to wait for its perf map, in ms. Default 10 s (a cold start on a busy machine). */
  readyTimeoutMs?: number;
}

export interface DemoWorkload {
  pid: number;
  /** Ends the workload and waits for it. */
  stop(): Promise<void>;
}

export async function startDemoWorkload(options: DemoWorkloadOptions): Promise<DemoWorkload> {
  const child = execa(options.nodePath, [...nodePerfMapFlags, demoWorkloadPath, String(options.lifetimeSeconds)], {
    stdio: 'ignore',
    reject: false,
  });
  const pid = child.pid;
  const stop = async () => {
    child.kill('SIGTERM');
    await child;
  };
  if (pid === undefined) {
    const result = await child;
    throw new ProfcpuError('IO', `the demo workload could not start: ${result.message ?? 'unknown error'}`, {
      remedy: `Check that ${options.nodePath} runs.`,
    });
  }
  // V8 writes /tmp/perf-<pid>.map as soon as it compiles code: its presence means the workload is running.
  const deadline = Date.now() + (options.readyTimeoutMs ?? 10_000);
  while (
    !(await stat(`/tmp/perf-${pid}.map`).then(
      () => true,
      () => false,
    ))
  ) {
    if (child.exitCode !== null || Date.now() > deadline) {
      await stop();
      throw new ProfcpuError('IO', `the demo workload (${demoWorkloadPath}) did not start writing its perf map`, {
        remedy: 'Check that /tmp is writable and that node supports --perf-basic-prof.',
      });
    }
    await sleep(50);
  }
  return { pid, stop };
}

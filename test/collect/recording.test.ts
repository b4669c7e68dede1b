// The recording phase against a fake perf: a perf that ends while attaching, before it enabled its events (perf 7.3
// did, exit 255 and nothing said, on a .NET target whose threads came and went), is started once more, afresh; one
// that fails after recording began, or fails twice, is not. A snapshot refresh that never ends does not hold perf
// past its stop.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { collectDefaults } from '../../src/collect/options.js';
import { recordTarget } from '../../src/collect/recording.js';
import type { TargetSnapshotter } from '../../src/collect/snapshot.js';
import type { TargetInfo } from '../../src/target/inspect.js';
import { scratchFolder } from '../support/fake-executables.js';
import { tempDir } from '../support/temp.js';

const scratch = scratchFolder('recording');

/** A perf that counts its runs; `plan` says, per run, 'fail' (exit 255 at once) or 'record' (until SIGINT). */
async function fakePerf(plan: string[]): Promise<{ path: string; runs: () => Promise<string[]> }> {
  const log = join(scratch.dir, `runs-${plan.join('-')}-${Math.random()}`);
  const path = await scratch.executable(
    `perf-${Math.random().toString(36).slice(2)}`,
    [
      `n=$(($(wc -l <"${log}" 2>/dev/null || echo 0) + 1))`,
      'out=""; prev=""; for a; do [ "$prev" = -o ] && out=$a; prev=$a; done',
      `[ -e "$out" ] && echo "run $n: a file was in the way" >>"${log}.stale"`,
      `echo "run $n" >>"${log}"`,
      `case $n in ${plan.map((p, i) => `${i + 1}) mode=${p} ;;`).join(' ')} *) mode=fail ;; esac`,
      'printf PERFILE2 >"$out"',
      'if [ "$mode" = fail ]; then exit 255; fi',
      'echo "Events enabled" >&2',
      'if [ "$mode" = late ]; then sleep 0.2; exit 255; fi',
      "trap 'exit 130' INT",
      'while :; do sleep 0.05; done',
    ].join('\n'),
  );
  return {
    path,
    runs: async () => [
      ...(await readFile(log, 'utf8')).trim().split('\n'),
      ...(await readFile(`${log}.stale`, 'utf8').catch(() => '')).trim().split('\n').filter(Boolean),
    ],
  };
}

async function record(
  t: TestContext,
  perfPath: string,
  more: { refresh?: () => Promise<void>; stop?: AbortSignal } = {},
) {
  const dir = await tempDir(t, 'recording');
  const sleeper = spawn('sleep', ['30'], { stdio: 'ignore' });
  t.after(() => sleeper.kill('SIGKILL'));
  const retries: string[] = [];
  const result = recordTarget({
    options: { ...collectDefaults, perfPath, durationSeconds: 1, progressIntervalMs: 100 },
    target: { pid: sleeper.pid! } as TargetInfo,
    dir,
    event: 'cpu-clock',
    scope: { kind: 'process' },
    snapshotter: { refresh: more.refresh ?? (async () => {}) } as unknown as TargetSnapshotter,
    signal: new AbortController().signal,
    onRetry: (m) => retries.push(m),
    ...(more.stop && { stop: more.stop }),
  });
  return { result, retries };
}

test('a perf that ends before enabling its events is started once more, with its file out of the way', async (t) => {
  const perf = await fakePerf(['fail', 'record']);
  const { result, retries } = await record(t, perf.path);
  const recorded = await result;
  assert.equal(recorded.outcome.end, 'duration');
  assert.deepEqual(await perf.runs(), ['run 1', 'run 2']);
  assert.equal(retries.length, 1);
  assert.match(retries[0]!, /ended before it recorded anything \(.*exit code 255.*\); starting it once more/);
});

test('twice is enough: a perf that fails again is an error', async (t) => {
  const perf = await fakePerf(['fail', 'fail', 'record']);
  const { result, retries } = await record(t, perf.path);
  await assert.rejects(result, /exit code 255/);
  assert.deepEqual(await perf.runs(), ['run 1', 'run 2']);
  assert.equal(retries.length, 1);
});

test('a perf that fails after it began recording is not started again', async (t) => {
  const perf = await fakePerf(['late', 'record']);
  const { result, retries } = await record(t, perf.path);
  await assert.rejects(result, /exit code 255/);
  assert.deepEqual(await perf.runs(), ['run 1']);
  assert.deepEqual(retries, []);
});

// The reader's refresh may wait up to --target-timeout (120 s) on a target's file that hangs: the end of the duration
// and Ctrl-C stop perf after a short wait for it, not when it ends (here, never).
for (const end of ['duration', 'stopped'] as const) {
  test(
    `perf stops at the ${end === 'duration' ? 'end of the duration' : 'first Ctrl-C'} while a snapshot refresh never ends`,
    { timeout: 60_000 },
    async (t) => {
      const perf = await fakePerf(['record']);
      let refreshes = 0;
      const hung = () => (refreshes++ === 0 ? Promise.resolve() : new Promise<void>(() => {}));
      const stop = new AbortController();
      const { result } = await record(t, perf.path, { refresh: hung, stop: stop.signal });
      if (end === 'stopped') setTimeout(() => stop.abort(), 300);
      const recorded = await result;
      assert.equal(recorded.outcome.end, end);
      assert.ok(refreshes >= 2, `refreshes: ${refreshes}`);
      assert.deepEqual(await perf.runs(), ['run 1']);
    },
  );
}

// Cross-check of the off-CPU profile with a profiler we did not write: the fixture's `waits` workload on .NET 10,
// recorded at the same time by `profcpu collect --off-cpu` and by `dotnet-trace collect --profile
// dotnet-sampled-thread-time` (EventPipe's sample profiler, which samples every managed thread about once a
// millisecond, waiting ones too: a thread blocked in native code is a sample whose top frame is UNMANAGED_CODE_TIME).
// Compared: each known wait's share of the time the six wait methods spent waiting, EventPipe's waiting samples
// against profcpu's microseconds off the CPU; the same waits, shares within 10 points.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { needDotnetTrace, runDotnetTrace } from '../support/dotnet-trace.js';
import { canRecord, needDotnet } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';
import { dotnetTraceMethod, profcpuMethod } from './leading-methods.js';

const seconds = 8;
/** The waits of test/fixtures/dotnet-app/Program.cs (class Waits), as `Type::Method`. */
const waits = ['SleepPath', 'LockHolder', 'LockContender', 'SyncOverAsync', 'SocketRead', 'StarvedWorkItem'].map(
  (method) => `ProfcpuFixture.Waits::${method}`,
);
const margin = 0.1;

interface Speedscope {
  shared: { frames: { name: string }[] };
  profiles: { type: string; events?: { type: 'O' | 'C'; frame: number; at: number }[] }[];
}

/** Each wait's share of the waits' time, from a map of the time (any unit) each stack spent waiting. */
function shares(weights: Iterable<[methods: (string | undefined)[], weight: number]>): Map<string, number> {
  const time = new Map(waits.map((wait) => [wait, 0]));
  for (const [methods, weight] of weights) {
    const wait = waits.find((w) => methods.includes(w));
    if (wait) time.set(wait, time.get(wait)! + weight);
  }
  const total = [...time.values()].reduce((a, b) => a + b, 0);
  return new Map([...time].map(([wait, t]) => [wait, total > 0 ? t / total : 0]));
}

/** EventPipe's waiting time by stack: spans whose top frame is UNMANAGED_CODE_TIME (ms). */
function* eventPipeWaiting(file: Speedscope): Generator<[(string | undefined)[], number]> {
  const methods = file.shared.frames.map((f) => dotnetTraceMethod(f.name));
  for (const profile of file.profiles) {
    if (profile.type !== 'evented') continue;
    const stack: number[] = [];
    let last: number | undefined;
    for (const event of profile.events ?? []) {
      if (last !== undefined && event.at > last && file.shared.frames[stack.at(-1)!]?.name === 'UNMANAGED_CODE_TIME')
        yield [stack.map((f) => methods[f]), event.at - last];
      last = event.at;
      if (event.type === 'O') stack.push(event.frame);
      else stack.pop();
    }
  }
}

/** profcpu's off-CPU folded stacks by stack (µs). */
function* profcpuWaiting(folded: string): Generator<[(string | undefined)[], number]> {
  for (const line of folded.split('\n')) {
    const space = line.lastIndexOf(' ');
    if (space > 0) yield [line.slice(0, space).split(';').map(profcpuMethod), Number(line.slice(space + 1))];
  }
}

test('dotnet-trace’s thread-time profile and profcpu’s off-CPU profile give each known wait the same share', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const dotnetTrace = await needDotnetTrace(t);
  if (!dotnetTrace) return;
  const work = await tempDir(t, 'dotnet-trace-offcpu', '/var/tmp');
  const app = await startDotnetApp({ workloads: ['waits'], seconds: 120 });
  t.after(() => app.kill());
  const trace = join(work, 'trace.nettrace');
  const runTrace = (args: string[]) => runDotnetTrace(dotnetTrace, args);

  const [collected] = await Promise.all([
    runCli(
      ['collect', '--pid', String(app.pid), '--off-cpu', '--duration', String(seconds), '--symbols', 'none'].concat([
        '--output',
        join(work, 'out'),
      ]),
    ),
    runTrace(
      ['collect', '-p', String(app.pid), '--profile', 'dotnet-sampled-thread-time'].concat([
        '--duration',
        `00:00:00:${seconds}`,
        '-o',
        trace,
      ]),
    ),
  ]);
  assert.equal(collected.exitCode, 0, collected.all);
  await runTrace(['convert', trace, '--format', 'speedscope', '-o', join(work, 'trace')]);

  const speedscope = JSON.parse(await readFile(join(work, 'trace.speedscope.json'), 'utf8')) as Speedscope;
  const theirs = shares(eventPipeWaiting(speedscope));
  const ours = shares(profcpuWaiting(await readFile(join(work, 'out', layout.offCpuFolded), 'utf8')));
  const pct = (share: number) => `${(100 * share).toFixed(1)}%`;
  const both = waits.map((w) => `${w.replace(/.*::/, '')} ${pct(theirs.get(w)!)} vs ${pct(ours.get(w)!)}`).join(', ');
  t.diagnostic(`EventPipe vs profcpu: ${both}`);
  for (const wait of waits) {
    assert.ok(theirs.get(wait)! > 0.05, `EventPipe saw ${wait} wait: ${both}`);
    assert.ok(Math.abs(theirs.get(wait)! - ours.get(wait)!) <= margin, `${wait}: ${both}`);
  }
});

// Cross-check with a profiler we did not write: the fixture app on .NET 10 running its LINQ workload alone, sampled
// at the same time by `dotnet-trace collect --profile dotnet-sampled-thread-time` (EventPipe's sample profiler, the
// classic `cpu-sampling` profile, renamed in dotnet-trace 10 where `cpu-sampling` means collect-linux's kernel
// sampling) and by `profcpu collect` (perf). Both profiles must lead with the same managed methods, in the same
// order, with close shares.
//
// The measure is inclusive: a method's share of the workload thread's samples that run managed code, each method
// counted once per sample (test/naming/leading-methods.ts says how samples are picked alike in both). Inclusive, not
// self: EventPipe stops a thread at a GC-safe point to sample it, so the leaf it sees is skewed towards calls and
// loop back-edges (a third to a half of its leaves fall in Thread.PollGC, where perf sees no time), while the method
// a sample is in, and its callers, are the same whichever instruction it stopped at.
// Compared: the methods that lead, i.e. hold at least 30% of the samples in either profile (below that, the two
// samplers disagree by design, see below): the same ones, shares within 10 percentage points, in the same order
// unless within those 10 points in the profile that orders them. Measured here (.NET 10.0.12, dotnet-trace 10.0.750501,
// loaded machine): ToArray 99.7% vs 97.6%, ToArrayNoPresizing 99.7% vs 91.8% (EventPipe vs profcpu).
// Below 30% (printed, not asserted): GetHashCode and SequenceEqual at 10-15% in both in most runs, but in one CI run
// EventPipe put OrderedIterator.ToList and GroupByIterator.MoveNext at 14-16% where perf saw under 0.2%: their time
// is in allocation and GC (native leaves, which EventPipe cannot sample and this comparison leaves out of perf's).
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { needDotnetTrace, runDotnetTrace } from '../support/dotnet-trace.js';
import { canRecord, needDotnet } from '../support/requirements.js';
import { foldedShares, leading, speedscopeShares, type MethodShares } from './leading-methods.js';
import { tempDir } from '../support/temp.js';

const entry = 'ProfcpuFixture.LinqMill::Grind';
const seconds = 10;
/** Methods compared, below the entry. */
/** A method holding at least this share of the workload's samples in either profile leads it. */
const leaderShare = 0.3;
/** How many methods the diagnostics print. */
const top = 4;
/** Largest difference between the two shares of a method, and between two methods that may swap places. */
const margin = 0.1;

const pct = (share: number) => `${(100 * share).toFixed(1)}%`;
const describe = (shares: MethodShares) =>
  leading(shares, top + 2)
    .map(([method, share]) => `  ${pct(share)} ${method}`)
    .join('\n');

test('dotnet-trace and profcpu agree on the methods that lead a CPU-bound workload', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const dotnetTrace = await needDotnetTrace(t);
  if (!dotnetTrace) return;
  const work = await tempDir(t, 'dotnet-trace', '/var/tmp');
  const app = await startDotnetApp({ workloads: ['linq'], seconds: 120 });
  t.after(() => app.kill());

  const trace = join(work, 'trace.nettrace');
  const runTrace = (args: string[]) => runDotnetTrace(dotnetTrace, args);

  const duration = String(seconds);
  const [collected] = await Promise.all([
    runCli([
      'collect',
      '--pid',
      String(app.pid),
      '--duration',
      duration,
      '--frequency',
      '499',
      '--output',
      join(work, 'out'),
    ]),
    runTrace([
      'collect',
      '-p',
      String(app.pid),
      '--profile',
      'dotnet-sampled-thread-time',
      '--duration',
      `00:00:00:${duration}`,
      '-o',
      trace,
    ]),
  ]);
  assert.equal(collected.exitCode, 0, collected.all);
  await runTrace(['convert', trace, '--format', 'speedscope', '-o', join(work, 'trace')]);

  const eventPipe = speedscopeShares(await readFile(join(work, 'trace.speedscope.json'), 'utf8'), entry);
  const profcpu = foldedShares(await readFile(join(work, 'out', layout.foldedStacks), 'utf8'), entry);
  const both =
    `dotnet-trace (${eventPipe.total.toFixed(0)} ms of samples):\n${describe(eventPipe)}\n` +
    `profcpu (${profcpu.total} samples):\n${describe(profcpu)}`;
  t.diagnostic(both.replace(/\n/g, ' | '));
  assert.ok(eventPipe.total >= 1000 && profcpu.total >= 100, `enough samples of the workload:\n${both}`);

  const leaders = (shares: MethodShares) => leading(shares, Infinity).filter(([, share]) => share >= leaderShare);
  const theirs = leaders(eventPipe);
  const ours = leaders(profcpu);
  assert.ok(theirs.length >= 2, `at least two methods lead the workload in EventPipe's profile:\n${both}`);
  assert.deepEqual(
    new Set(ours.map(([m]) => m)),
    new Set(theirs.map(([m]) => m)),
    `the same methods hold ${pct(leaderShare)} or more:\n${both}`,
  );
  for (const [method, share] of theirs) {
    const other = profcpu.shares.get(method) ?? 0;
    assert.ok(Math.abs(share - other) <= margin, `${method}: ${pct(share)} vs ${pct(other)}:\n${both}`);
  }
  // The same order, except for methods whose shares are within the margin in the profile that orders them.
  for (const [a, b] of [
    [theirs, profcpu],
    [ours, eventPipe],
  ] as const)
    for (let i = 0; i < a.length; i++)
      for (let j = i + 1; j < a.length; j++) {
        const [first, firstShare] = a[i]!;
        const [second, secondShare] = a[j]!;
        if (firstShare - secondShare <= margin) continue;
        assert.ok(
          (b.shares.get(first) ?? 0) >= (b.shares.get(second) ?? 0),
          `${first} leads ${second} by ${pct(firstShare - secondShare)} in one profile, not in the other:\n${both}`,
        );
      }
});

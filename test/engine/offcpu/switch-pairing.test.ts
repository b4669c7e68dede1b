// Time off the CPU from the scheduler's switches: each sched_switch sample paired with its thread's next SWITCH IN.
// On a program whose threads sleep 10 ms and 30 ms at a time, recorded by perf, every stretch comes out at its
// sleep; the SWITCH records read as perf script -D reads them; lost and unmatched records are counted, not guessed.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { readPerfDataFile } from '../../../src/engine/perf-data/reader.js';
import { SwitchPairing, type OffCpuInterval } from '../../../src/engine/offcpu/switch-pairing.js';
import { describe, perfDumpEvents } from '../perf-data/perf-dump.js';
import { canRecord, needCommand } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';
import { recordSleepers } from '../../fixtures/offcpu/sleepers.js';

test('pairs a switch-out sample with the next switch in of its thread; says preempted; counts what has no pair', () => {
  const pairing = new SwitchPairing<string>();
  pairing.switchedOut(10, 11, 1_000, 'read');
  assert.equal(pairing.switched(11, true, false, 1_020), undefined);
  pairing.switchedOut(10, 12, 1_500, 'spin');
  pairing.switched(12, true, true, 1_510);
  assert.deepEqual(pairing.switched(11, false, false, 9_000), {
    pid: 10,
    tid: 11,
    stack: 'read',
    startNs: 1_000,
    ns: 8_000,
    preempted: false,
    open: false,
  });
  assert.equal(pairing.switched(12, false, false, 2_000)?.preempted, true);
  // A switch in with nothing before it (the recording began there), a switch-out whose switch in was lost.
  assert.equal(pairing.switched(13, false, false, 3_000), undefined);
  pairing.switchedOut(10, 11, 10_000, 'read');
  pairing.switchedOut(10, 11, 12_000, 'write');
  // A thread preempted with no sample (the recording samples blocking switches only): left out, not missing.
  pairing.switched(14, true, true, 3_100);
  assert.equal(pairing.switched(14, false, false, 3_200), undefined);
  assert.deepEqual(pairing.counts, {
    unpaired: 1,
    inWithoutOut: 1,
    preemptedUnsampled: 1,
    unsampled: 0,
    unsampledOpen: 0,
  });
  // Still off the CPU at the end: charged up to it.
  const open = pairing.finish(20_000);
  assert.deepEqual(
    open.map((i) => [i.tid, i.stack, i.ns, i.open]),
    [[11, 'write', 8_000, true]],
  );
  assert.deepEqual(pairing.finish(30_000), []);
});

test('stacks taken in windows of time: a thread blocked with no sample is measured all the same, not paired', () => {
  const pairing = new SwitchPairing<string>({ countUnsampled: true, minUnsampledNs: 1_000, longNs: 2_800 });
  // Sampled: as before.
  pairing.switchedOut(10, 11, 1_000, 'read');
  pairing.switched(11, true, false, 1_010, 10);
  assert.equal(pairing.switched(11, false, false, 5_000, 10)?.ns, 4_000);
  // Blocked with no sample (outside a window): its switch records measure it.
  assert.equal(pairing.switched(11, true, false, 6_000, 10), undefined);
  assert.equal(pairing.switched(11, false, false, 9_000, 10), undefined);
  assert.equal(pairing.switched(12, true, false, 6_000, 10), undefined);
  assert.equal(pairing.switched(12, false, false, 8_500, 10), undefined);
  // Under the minimum: left out. Preempted: runnable, as before.
  pairing.switched(12, true, false, 9_000, 10);
  pairing.switched(12, false, false, 9_500, 10);
  pairing.switched(12, true, true, 10_000, 10);
  pairing.switched(12, false, false, 10_700, 10);
  assert.deepEqual(
    [...pairing.unsampledNs],
    [
      [11, 3_000],
      [12, 2_500],
    ],
  );
  // The long ones (longNs) apart too.
  assert.deepEqual([...pairing.unsampledLongNs], [[11, 3_000]]);
  assert.deepEqual([...pairing.runnableNs], [[12, 700]]);
  assert.equal(pairing.pidOf.get(12), 10);
  // Still blocked at the end: measured up to it. A thread whose EXIT record came first: its last switch out blocks
  // nothing; a FORK gives its id to a new thread, which blocks again. A switch record with no thread (-1): none.
  pairing.switched(13, true, false, 11_000, 10);
  pairing.exited(14);
  pairing.switched(14, true, false, 11_000, 10);
  pairing.exited(15);
  pairing.forked(15);
  pairing.switched(15, true, false, 12_000, 10);
  pairing.switched(-1, true, false, 11_000, -1);
  assert.deepEqual(pairing.finish(20_000), []);
  assert.equal(pairing.unsampledNs.get(13), 9_000);
  assert.equal(pairing.unsampledNs.get(15), 8_000);
  assert.equal(pairing.unsampledNs.has(14), false);
  assert.equal(pairing.unsampledNs.has(-1), false);
  assert.deepEqual(pairing.counts, {
    unpaired: 0,
    inWithoutOut: 0,
    preemptedUnsampled: 1,
    unsampled: 4,
    unsampledOpen: 2,
  });
  // Without countUnsampled, such a switch in has no partner.
  const plain = new SwitchPairing<string>();
  plain.switched(11, true, false, 6_000);
  plain.switched(11, false, false, 9_000);
  assert.deepEqual(plain.counts, {
    unpaired: 0,
    inWithoutOut: 1,
    preemptedUnsampled: 0,
    unsampled: 0,
    unsampledOpen: 0,
  });
});

test('a program sleeping 10 ms and 30 ms at a time, recorded by perf: each stretch off the CPU is its sleep', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const dir = await tempDir(t, 'offcpu');
  const output = join(dir, 'perf.data');
  // It runs until the clock's second has turned 3 times: 2 to 3 s.
  await recordSleepers(dir, output, 3);

  // The SWITCH records as perf reads them, in its order.
  const perfs = (await perfDumpEvents(output)).filter((line) => line.includes(' SWITCH '));
  const ours: string[] = [];
  const pairing = new SwitchPairing<bigint>();
  const intervals: OffCpuInterval<bigint>[] = [];
  let last = 0;
  let main = 0;
  await readPerfDataFile(output, {
    event(event) {
      if (event.kind === 'switch') ours.push(describe(event));
      if (event.time === undefined) return;
      const time = Number(event.time);
      last = Math.max(last, time);
      if (event.kind === 'comm' && event.comm === 'sleepers') main = event.pid;
      if (event.kind === 'sample' && event.pid === main) {
        // The stack's key here: its first user address (the sleep itself is named in the flame graphs' tests).
        pairing.switchedOut(event.pid, event.tid, time, event.callchain?.at(-1) ?? 0n);
      } else if (event.kind === 'switch' && event.pid === main) {
        const interval = pairing.switched(event.tid, event.out, event.preempted, time);
        if (interval) intervals.push(interval);
      }
    },
  });
  assert.ok(perfs.length > 100, `${perfs.length} switches`);
  assert.deepEqual(ours, perfs);

  // By thread: the main thread naps 30 ms, the other sleeps 10 ms, each after under a millisecond of work.
  const blocked = intervals.filter((i) => !i.preempted);
  const byThread = (main: boolean) => blocked.filter((i) => (i.tid === i.pid) === main).map((i) => i.ns / 1e6);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const napper = byThread(true);
  const sleeper = byThread(false);
  t.diagnostic(
    `napper ${napper.length} stretches, median ${median(napper).toFixed(2)} ms; sleeper ${sleeper.length}, ` +
      `median ${median(sleeper).toFixed(2)} ms; counts ${JSON.stringify(pairing.counts)}`,
  );
  // At least 2 s of it: some 66 naps and 198 sleeps (fewer on a loaded machine).
  assert.ok(napper.length >= 50 && median(napper) >= 30 && median(napper) < 33, `napper: ${napper.join(' ')}`);
  assert.ok(sleeper.length >= 150 && median(sleeper) >= 10 && median(sleeper) < 11.5, `sleeper: ${sleeper.join(' ')}`);
  // nanosleep never wakes early; a stretch of another wait (the thread's start, a page read) is rare.
  const near = (xs: number[], ms: number) => xs.filter((x) => x >= ms - 0.1 && x < ms * 1.2).length / xs.length;
  assert.ok(near(napper, 30) >= 0.9 && near(sleeper, 10) >= 0.9, `${napper.join(' ')}\n${sleeper.join(' ')}`);
  assert.equal(pairing.counts.unpaired, 0);
  assert.ok(pairing.finish(last).length <= 2);
});

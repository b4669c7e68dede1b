// The off-CPU fold: each thread's switch-out stack, named as the CPU flame graph names it, weighed by the microseconds
// it stayed off the CPU. On a program whose two threads sleep 10 ms and 30 ms at a time, nearly all the time off the
// CPU is under their two sleeps, half each, and the weights are microseconds: 10 ms and 30 ms a stretch.
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../../src/files/output-folder.js';
import { foldOffCpu, unsampledFrame, weighToThreads } from '../../../src/engine/offcpu/offcpu-fold.js';
import type { FoldResult } from '../../../src/stacks/fold.js';
import { canRecord, needCommand } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';
import { recordSleepers } from '../../fixtures/offcpu/sleepers.js';

test('a program sleeping 10 ms and 30 ms at a time: its time off the CPU under each sleep, in microseconds', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const dir = await tempDir(t, 'offcpu-fold');
  const out = join(dir, 'out');
  await mkdir(out);
  await recordSleepers(dir, join(out, 'perf.data'), 3);
  const folder = await OutputFolder.open(out);
  t.after(() => folder.close());
  const warnings: string[] = [];
  const { fold, intervals, unpaired } = await foldOffCpu(folder, { fold: {} }, { warn: (w) => warnings.push(w) });

  const under = (frame: string) =>
    [...fold.stacks].filter(([stack]) => stack.includes(`;${frame};`)).reduce((sum, [, us]) => sum + us, 0);
  const sleeper = under('sleeper');
  const main = under('main');
  t.diagnostic(
    `${fold.weight} µs off the CPU in ${intervals.blocked} stretches; under sleeper ${sleeper}, under main ${main}; ` +
      `unpaired ${JSON.stringify(unpaired)}`,
  );
  // Named as CPU samples are: the thread's frames down to the kernel's schedule().
  assert.ok(
    [...fold.stacks.keys()].some((stack) => /;sleeper;.*clock_nanosleep;.*;schedule_\[k\]/.test(stack)),
    [...fold.stacks.keys()].join('\n'),
  );
  // Both threads live as long and sleep nearly all the time: half each, and next to nothing elsewhere.
  assert.ok(sleeper + main >= fold.weight * 0.95, `${sleeper} + ${main} of ${fold.weight}`);
  assert.ok(Math.abs(sleeper - main) <= fold.weight * 0.1, `${sleeper} against ${main}`);
  // Microseconds: each sleeper stretch 10.06 ms, each of main's 30.06 ms, so the stretches add up.
  const stretches = sleeper / 10_060 + main / 30_060;
  assert.ok(Math.abs(stretches - intervals.blocked) <= intervals.blocked * 0.1, `${stretches} of ${intervals.blocked}`);
  assert.ok(fold.weight >= 2 * 2_000_000 * 0.8, `${fold.weight} µs for two threads of 2 to 3 s`);
  assert.equal(unpaired.unpaired, 0);
  assert.deepEqual(warnings, []);

  // Stretches under a minimum are dropped, and counted: past 20 ms, only main's 30 ms naps stay.
  const long = await foldOffCpu(folder, { fold: {}, minBlockUs: 20_000 }, { warn: () => {} });
  assert.ok(long.intervals.short >= intervals.blocked * 0.6, JSON.stringify(long.intervals));
  assert.equal(long.intervals.blocked + long.intervals.short, intervals.blocked + intervals.short);
  assert.ok(Math.abs(long.fold.weight - main) <= main * 0.1, `${long.fold.weight} against ${main}`);

  // Held samples are bounded: with no room for one, every stretch is counted unheld, none folded nor lost.
  const none = await foldOffCpu(folder, { fold: {}, maxHeldBytes: 64 }, { warn: () => {} });
  const all = (i: typeof intervals) => i.blocked + i.open + i.short + i.preempted + i.unheld;
  assert.equal(none.intervals.unheld, all(intervals), JSON.stringify(none.intervals));
  assert.equal(none.fold.weight, 0);
  assert.deepEqual(none.unpaired, {
    unpaired: 0,
    inWithoutOut: unpaired.inWithoutOut,
    preemptedUnsampled: 0,
    unsampled: 0,
    unsampledOpen: 0,
  });
});

test('stacks taken in windows of time: each thread’s stacks weighed to its whole time blocked, its root spelled back', () => {
  // Folded with includeTid: thread 11 had 300 µs with a stack out of 1 200 blocked, 12 none of its 500.
  const stacks = new Map([
    ['worker-10/11;main;read_[k]', 200],
    ['worker-10/11;main;poll_[k]', 100],
    ['other_name-10/13;main;sleep', 50],
  ]);
  const fold = {
    stacks,
    weight: 350,
    addressed: [{ stack: 'worker-10/11;main;[libx.so]', addresses: [undefined, undefined, 0x1234n], weight: 100 }],
  } as unknown as FoldResult;
  const pairing = {
    unsampledNs: new Map([
      [11, 900_000],
      [12, 500_000],
    ]),
    pidOf: new Map([[12, 10]]),
  };
  const sampled = new Map([
    [11, 300],
    [13, 50],
  ]);
  const names = (tid: number) => (tid === 12 ? 'idle_thread' : `t${tid}`);
  const { fold: weighed, switchWindows } = weighToThreads(fold, {}, sampled, pairing, names);
  assert.deepEqual(
    [...weighed.stacks],
    [
      ['worker;main;read_[k]', 800],
      ['worker;main;poll_[k]', 400],
      ['other_name;main;sleep', 50],
      [`idle_thread;${unsampledFrame}`, 500],
    ],
  );
  assert.equal(weighed.weight, 1750);
  assert.deepEqual(weighed.addressed[0], { ...fold.addressed[0], stack: 'worker;main;[libx.so]', weight: 400 });
  assert.deepEqual(switchWindows, { sampledUs: 350, unsampledUs: 1400, threads: 3, unsampledThreads: 1 });
  // The roots as asked: with the process, or the thread too.
  const byPid = weighToThreads(fold, { includePid: true }, sampled, pairing, names).fold;
  assert.deepEqual([...byPid.stacks.keys()].slice(-2), [
    'other_name-10;main;sleep',
    `idle_thread-10;${unsampledFrame}`,
  ]);
  const byTid = weighToThreads(fold, { includeTid: true }, sampled, pairing, names).fold;
  assert.equal(byTid.stacks.get('worker-10/11;main;read_[k]'), 800);
});

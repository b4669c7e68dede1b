// The off-CPU fold: each thread's switch-out stack, named as the CPU flame graph names it, weighed by the microseconds
// it stayed off the CPU. On a program whose two threads sleep 10 ms and 30 ms at a time, nearly all the time off the
// CPU is under their two sleeps, half each, and the weights are microseconds: 10 ms and 30 ms a stretch.
import assert from 'node:assert/strict';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../../src/files/output-folder.js';
import { foldOffCpu } from '../../../src/engine/offcpu/offcpu-fold.js';
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
  assert.deepEqual(none.unpaired, { unpaired: 0, inWithoutOut: unpaired.inWithoutOut, preemptedUnsampled: 0 });
});

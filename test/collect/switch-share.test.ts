// collect --switch-share auto: the share of the time an off-CPU recording takes the switches' stacks, from the
// target's blocking switches a second (its threads' voluntary_ctxt_switches, read twice): every one up to 2 000 a
// second, about 2 000 stacks a second above, 5% at least; a number asked for is taken as it is.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { test } from 'node:test';
import {
  autoStacksPerSecond,
  blockingSwitchRate,
  chooseSwitchShare,
  minAutoShare,
} from '../../src/collect/switch-share.js';

test('auto takes every switch of a quiet target, about 2 000 stacks a second of a busy one, 5% at least', () => {
  assert.equal(chooseSwitchShare('auto', 150).share, 1);
  assert.equal(chooseSwitchShare('auto', autoStacksPerSecond).share, 1);
  assert.equal(chooseSwitchShare('auto', undefined).share, 1);
  assert.match(chooseSwitchShare('auto', undefined).reason, /could not be read/);
  const busy = chooseSwitchShare('auto', 15_000);
  assert.equal(busy.share, 0.13);
  assert.match(busy.reason, /^13% of the time, in random windows \(15000 blocking switches a second;/);
  assert.equal(chooseSwitchShare('auto', 1e7).share, minAutoShare);
  assert.deepEqual(chooseSwitchShare(0.25, 1e7), { share: 0.25, reason: '25% of the time, as asked' });
});

test('the rate of a process that wakes every millisecond is its threads’ blocking switches a second', async (t) => {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1)'], { stdio: 'ignore' });
  t.after(() => child.kill('SIGKILL'));
  await new Promise((resolve) => setTimeout(resolve, 300));
  const rate = await blockingSwitchRate(child.pid!, {}, 500);
  t.diagnostic(`${rate} blocking switches a second`);
  assert.ok(rate !== undefined && rate > 200 && rate < 5000, String(rate));
  assert.equal(await blockingSwitchRate(2 ** 22 + 7, {}, 10), undefined, 'no such process');
});

// --unwind auto takes mixed unwinding where it pays: on x86-64, when the stack copies of the whole recording (every CPU
// busy for its whole duration) fit the disk budget; else frame pointers, saying why. What was asked is done.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildOptionOn } from '../../src/perf/preflight.js';
import { chooseUnwind, stackCopyBytes, unwindBudget, type UnwindInputs } from '../../src/collect/unwind-choice.js';

const inputs: UnwindInputs = {
  requested: 'auto',
  stackBytes: 32768,
  durationSeconds: 10,
  frequency: 99,
  cpus: 2,
  arch: 'x64',
  perfCompresses: true,
};

test('the default recording of a few CPUs takes mixed unwinding, compressed, and says what it costs at most', () => {
  const plan = chooseUnwind(inputs);
  assert.deepEqual({ ...plan, reason: '' }, { kind: 'mixed', stackBytes: 32768, compress: true, reason: '' });
  // 10 s × 99 Hz × 2 CPUs × 33 KiB / 8: 8 MiB.
  assert.equal(stackCopyBytes(inputs), Math.ceil((1980 * (32768 + unwindBudget.sampleOverhead)) / 8));
  assert.equal(
    plan.reason,
    '10 s × 99 Hz × 2 CPUs of 32768-byte stack copies: up to 8 MiB compressed, within the 512 MiB allowed',
  );
});

test('copies past the budget or a quarter of the free space fall back to frame pointers, saying how to get them', () => {
  // 64 CPUs for 60 s: 1.5 GiB compressed.
  const big = chooseUnwind({ ...inputs, cpus: 64, durationSeconds: 60 });
  assert.equal(big.kind, 'fp');
  assert.match(big.reason, /up to 1\d{3} MiB compressed, more than the 512 MiB allowed \(the cap\)/);
  assert.match(big.reason, /--unwind mixed records the copies anyway; a shorter --duration or a smaller --stack-size/);
  // A perf without zstd writes the copies whole: 10 s of 32 CPUs is 1 GiB.
  const raw = chooseUnwind({ ...inputs, cpus: 32, perfCompresses: false });
  assert.equal(raw.kind, 'fp');
  assert.match(raw.reason, /\(this perf does not compress its records\)/);
  assert.equal(chooseUnwind({ ...inputs, cpus: 4, perfCompresses: false }).kind, 'mixed');
  const disk = chooseUnwind({ ...inputs, freeBytes: 20 << 20 });
  assert.equal(disk.kind, 'fp');
  assert.match(disk.reason, /more than the 5 MiB allowed \(a quarter of the free space\)/);
});

test('another architecture records frame pointers; fp and mixed are done as asked, whatever they cost', () => {
  const arm = chooseUnwind({ ...inputs, arch: 'arm64' });
  assert.deepEqual(arm, {
    kind: 'fp',
    reason: 'the built-in engine unwinds stack copies of x86-64 only, and this machine is arm64',
  });
  assert.deepEqual(chooseUnwind({ ...inputs, requested: 'fp' }), { kind: 'fp', reason: '--unwind fp' });
  const forced = chooseUnwind({ ...inputs, requested: 'mixed', cpus: 512, perfCompresses: false, arch: 'arm64' });
  assert.deepEqual(forced, { kind: 'mixed', stackBytes: 32768, compress: false, reason: '--unwind mixed' });
});

test('perf’s build options say whether it compresses', () => {
  const options = [
    '                 dwarf: [ on  ]  # HAVE_DWARF_SUPPORT',
    '                  zstd: [ OFF ]  # HAVE_ZSTD_SUPPORT',
    '             libunwind: [ on  ]  # HAVE_LIBUNWIND_SUPPORT',
  ].join('\n');
  assert.equal(buildOptionOn(options, 'zstd'), false);
  assert.equal(buildOptionOn(options, 'libunwind'), true);
  assert.equal(buildOptionOn(options.replace('OFF', 'on '), 'zstd'), true);
  assert.equal(buildOptionOn('zstd_extra: [ on  ]', 'zstd'), false);
});

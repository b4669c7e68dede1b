// Golden tests of the fold stage: each fixture in test/fixtures/perf-script/ folded and compared with its expected
// output in results/, whole and again cut in 1-byte and random chunks (chunk boundaries must not change anything).
// `-collapsed` files are stackcollapse-perf.pl's own output (see the fixtures' README); `-folded` files are
// profcpu's default mode, re-blessed from its own output with PROFCPU_BLESS=1.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { StackFolder, type FoldOptions, type FoldResult } from '../../src/stacks/fold.js';
import { formatFolded } from '../../src/stacks/folded.js';
import { assertGolden } from '../support/golden.js';

const fixtures = new URL('../fixtures/perf-script/', import.meta.url);

/** stackcollapse-perf.pl's flags as FoldOptions. */
const perlFlags: Record<string, Partial<FoldOptions>> = {
  '--all': { annotateKernel: true, annotateJit: true },
  '--kernel': { annotateKernel: true },
  '--jit': { annotateJit: true },
  '--pid': { includePid: true },
  '--tid': { includeTid: true },
  '--addrs': { addrs: true },
  '--event-filter=task-clock': { eventFilter: 'task-clock' },
};

const compatCases: [string, string[]][] = [
  ...[
    'native-threads',
    'node-jit',
    'kernel-header',
    'fields-pid-tid-cpu',
    'fields-minimal',
    'fields-no-period',
    'two-events',
    'dotnet-names',
    'dotnet-perfmap',
    'dotnet-doublemapper',
    'crlf',
    'truncated',
    'garbage',
  ].flatMap((name): [string, string[]][] => [
    [name, []],
    [name, ['--all']],
  ]),
  ['native-threads', ['--pid']],
  ['native-threads', ['--tid']],
  ['fields-pid-tid-cpu', ['--pid']],
  ['fields-pid-tid-cpu', ['--tid']],
  ['fields-no-period', ['--tid']],
  ['dotnet-names', ['--addrs']],
  ['dotnet-names', ['--all', '--addrs', '--tid']],
  ['two-events', ['--event-filter=task-clock']],
  ['two-events', ['--jit', '--kernel']],
  ['node-jit', ['--jit']],
  ['kernel-header', ['--kernel']],
  ['kernel-header', ['--addrs']],
  ['garbage', ['--pid']],
];

const defaultCases: [string, string, Partial<FoldOptions>][] = [
  ['dotnet-names', '', {}],
  ['dotnet-names', '-module-arguments-tier', { keepModule: true, keepArguments: true, keepTier: true }],
  ['dotnet-names', '-period-addrs-tid', { weight: 'period', addrs: true, includeTid: true }],
  ['dotnet-perfmap', '', {}],
  ['dotnet-perfmap', '-module-tier', { keepModule: true, keepTier: true }],
  ['dotnet-doublemapper', '', {}],
  ['node-jit', '', {}],
  ['kernel-header', '', {}],
  ['native-threads', '', {}],
  ['two-events', '', {}],
  ['fields-minimal', '', {}],
  ['fields-no-period', '-period-tid', { weight: 'period', includeTid: true }],
  ['garbage', '', {}],
  ['crlf', '', {}],
  ['truncated', '', {}],
  ['tracepoint-events', '', {}],
  ['tracepoint-events', '-event-filter', { eventFilter: 'sched:sched_switch' }],
  ['one-line', '', {}],
  ['one-line', '-event-filter', { eventFilter: 'sched:sched_switch' }],
];

function fold(input: Buffer, options: Partial<FoldOptions>, chunks: 'whole' | 'bytes' | 'random'): FoldResult {
  const folder = new StackFolder(options);
  if (chunks === 'whole') folder.write(input);
  else {
    let seed = 12345;
    for (let at = 0; at < input.length;) {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      const size = chunks === 'bytes' ? 1 : 1 + (seed % 4096);
      // Fresh copies: the folder must not keep references into buffers the caller reuses.
      folder.write(Uint8Array.from(input.subarray(at, at + size)));
      at += size;
    }
  }
  return folder.end();
}

function text(result: FoldResult): string {
  return [...formatFolded(result.stacks)].join('');
}

for (const [name, flags] of compatCases) {
  const suffix = flags.length ? `-${flags.map((f) => f.replace(/^--/, '').replace(/=/g, '-')).join('-')}` : '';
  test(`compat: ${name}${flags.length ? ` ${flags.join(' ')}` : ''} matches stackcollapse-perf.pl`, () => {
    const input = readFileSync(new URL(`${name}.txt`, fixtures));
    const expected = readFileSync(new URL(`results/${name}-collapsed${suffix}.txt`, fixtures), 'utf8');
    const options: Partial<FoldOptions> = { compat: true };
    for (const flag of flags) Object.assign(options, perlFlags[flag]);
    for (const chunks of ['whole', 'bytes', 'random'] as const) {
      assert.equal(text(fold(input, options, chunks)), expected, `${chunks} chunks`);
    }
  });
}

for (const [name, suffix, options] of defaultCases) {
  test(`default: ${name}${suffix}`, () => {
    const input = readFileSync(new URL(`${name}.txt`, fixtures));
    const whole = text(fold(input, options, 'whole'));
    assertGolden(fileURLToPath(new URL(`results/${name}-folded${suffix}.txt`, fixtures)), whole);
    assert.equal(text(fold(input, options, 'bytes')), whole, '1-byte chunks');
    assert.equal(text(fold(input, options, 'random')), whole, 'random chunks');
  });
}

// The off-CPU lines of the summaries: the heaviest blocking stacks named by thread, app method, framework method and
// native wait; the thread kinds' three times; and a hostile target's thread and frame names arriving escaped.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { offCpuSummary } from '../../src/cli/offcpu-summary.js';
import type { OffCpuReport } from '../../src/postprocess/offcpu-outputs.js';
import { assertNoTerminalControl } from './terminal-control.js';

const report = (top: OffCpuReport['top'], threads?: OffCpuReport['threads']): OffCpuReport => ({
  source: 'sched_switch',
  blockedUs: top.reduce((sum, t) => sum + t.us, 0),
  minBlockUs: 1,
  preempted: false,
  intervals: { blocked: 10, preempted: 4, open: 1, short: 2, unheld: 0 },
  unpaired: { unpaired: 0, inWithoutOut: 3, preemptedUnsampled: 4, unsampled: 0, unsampledOpen: 0 },
  distinctStacks: top.length,
  top,
  ...(threads && { threads }),
});

test('the heaviest blocking stacks by thread, app method, framework method and native wait; what was left out', () => {
  const lines = offCpuSummary(
    report(
      [
        {
          stack:
            'wait-sleep;start_thread;App.Worker::Poll_[j];System.Threading.Thread::Sleep_[j];[libcoreclr.so];' +
            '__futex_abstimed_wait_common;schedule_[k]',
          us: 3_000_000,
        },
        { stack: 'kworker;schedule_[k]', us: 1_000_000 },
      ],
      [{ kind: '.NET_TP_Worker', runningUs: 120_000, blockedUs: 19_900_000, runnableUs: 2_500 }],
    ),
  );
  assert.deepEqual(lines, [
    'off-CPU: 4000.0 ms blocked in 11 stretches; left out: 2 under --min-block 1 µs, 4 preempted (waiting for a CPU, ' +
      "not blocked), 3 switches with no partner (records lost, or the recording's edges)",
    '   75.0%   3000.0 ms  wait-sleep: App.Worker::Poll → System.Threading.Thread::Sleep → __futex_abstimed_wait_common',
    '   25.0%   1000.0 ms  kworker: (kernel only)',
    'threads: running / blocked / waiting for a CPU (wallclock.svg)',
    '    120.0 ms /    19.9 s /    2.5 ms  .NET_TP_Worker',
  ]);
});

test('a hostile target’s thread and frame names arrive escaped', () => {
  const lines = offCpuSummary(
    report(
      [{ stack: 'evil\x1b]0;owned\x07;\u202eApp::Run_[j];read\r\nfake line', us: 5 }],
      [{ kind: 'evil\x1b[2J', runningUs: 1, blockedUs: 2, runnableUs: 3 }],
    ),
  );
  for (const line of lines) assertNoTerminalControl(line, 'a summary line');
  assert.equal(lines.join('\n').split('\n').length, lines.length, 'no line breaks inside a line');
});

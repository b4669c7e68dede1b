import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { isProfcpuError } from '../../src/error.js';
import {
  buildIdMmapWorks,
  parseRecordSummary,
  recordArgs,
  startRecord,
  type CallGraph,
} from '../../src/perf/record.js';
import type { RecordScope } from '../../src/perf/record-scope.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { canRecord, needCommand } from '../support/requirements.js';
import { nonexistentPid } from '../support/processes.js';
import { tempDir } from '../support/temp.js';

test('recordArgs: frame-pointer call graphs, CLOCK_MONOTONIC for jitdump, one process, each sample written at once', () => {
  assert.deepEqual(recordArgs({ pid: 42, output: '/o/perf.data' }), [
    'record',
    '-N',
    '--no-buffering',
    '-D',
    '1',
    '-F',
    '99',
    '-g',
    '-k',
    '1',
    '-e',
    'cpu-clock',
    '-p',
    '42',
    '-o',
    '/o/perf.data',
  ]);
  assert.deepEqual(recordArgs({ pid: 1, output: 'p', buildIdMmap: true }).slice(0, 4), [
    'record',
    '-N',
    '--no-buffering',
    '--buildid-mmap',
  ]);
  assert.deepEqual(recordArgs({ pid: 1, output: 'p', frequency: 499, event: 'cycles' }).slice(5, 13), [
    '-F',
    '499',
    '-g',
    '-k',
    '1',
    '-e',
    'cycles',
    '-p',
  ]);
});

test('recordArgs --off-cpu: the CPU event keeps its frequency and call graph, the tracepoint takes every switch', () => {
  const args = (callGraph: CallGraph, scope?: RecordScope) =>
    recordArgs({ pid: 42, output: 'p', offCpu: true, compress: true, callGraph, ...(scope && { scope }) }).join(' ');
  assert.equal(
    args({ kind: 'fp' }),
    'record -N -D 1 -z -g -k 1 -e cpu-clock/freq=99,name=cpu-clock/ -e sched:sched_switch --filter prev_state & 3 ' +
      '--switch-events -p 42 -o p',
  );
  // Mixed: the switches' stack copies are 8 KiB at most; only a thread that blocks is sampled.
  assert.equal(
    args({ kind: 'dwarf', stackBytes: 32768 }),
    'record -N -D 1 -z -g -k 1 -e cpu-clock/freq=99,call-graph=dwarf,stack-size=32768,name=cpu-clock/ ' +
      '-e sched:sched_switch/call-graph=dwarf,stack-size=8192/ --filter prev_state & 3 --switch-events -p 42 -o p',
  );
  assert.match(
    args({ kind: 'dwarf', stackBytes: 4096 }),
    / -e sched:sched_switch\/call-graph=dwarf,stack-size=4096\/ /,
  );
  // collect --switch-stack-size: as asked, larger or smaller than the samples' copies.
  const sized = (switchStackBytes: number) =>
    recordArgs({
      pid: 42,
      output: 'p',
      offCpu: true,
      callGraph: { kind: 'dwarf', stackBytes: 32768 },
      switchStackBytes,
    });
  assert.ok(sized(16384).includes('sched:sched_switch/call-graph=dwarf,stack-size=16384/'));
  assert.ok(sized(2048).includes('sched:sched_switch/call-graph=dwarf,stack-size=2048/'));
  // collect --switch-share: perf takes commands on its descriptor 3 (the windows); all of the time, none.
  const shared = (switchShare: number) => recordArgs({ pid: 42, output: 'p', offCpu: true, switchShare }).join(' ');
  assert.match(shared(0.25), / --switch-events --control=fd:3 -p 42 -o p$/);
  assert.doesNotMatch(shared(1), /--control/);
  assert.doesNotMatch(recordArgs({ pid: 42, output: 'p', switchShare: 0.25 }).join(' '), /--control/);
  // A cgroup: a dummy event first takes the switch records under the same -G.
  assert.match(
    args({ kind: 'fp' }, { kind: 'cgroup', cgroup: 'app' }),
    / -e dummy -e cpu-clock\/freq=99,name=cpu-clock\/ -e sched:sched_switch --filter .* --switch-events -a -G app -o p$/,
  );
});

test('buildIdMmapWorks wants perf and kernel 5.12 or later', () => {
  assert.equal(buildIdMmapWorks('6.1.187', '6.18.44-fc-v669'), true);
  assert.equal(buildIdMmapWorks('5.12', '5.12.0'), true);
  assert.equal(buildIdMmapWorks('6.1.187', '5.10.0-28-amd64'), false);
  assert.equal(buildIdMmapWorks('5.10.0', '6.1.0'), false);
  assert.equal(buildIdMmapWorks(undefined, '6.1.0'), false);
  assert.equal(buildIdMmapWorks('perf version unknown', '6.1.0'), false);
});

test('parseRecordSummary reads perf’s closing line, and its sample count when there is one', () => {
  assert.deepEqual(
    parseRecordSummary(
      '[ perf record: Woken up 1 times to write data ]\n[ perf record: Captured and wrote 0.024 MB perf.data (93 samples) ]',
    ),
    { megabytes: 0.024, samples: 93 },
  );
  assert.deepEqual(parseRecordSummary('[ perf record: Captured and wrote 0.001 MB /tmp/x.data ]'), {
    megabytes: 0.001,
  });
  assert.deepEqual(parseRecordSummary('perf: something else'), {});
});

async function out(t: TestContext): Promise<string> {
  const dir = await tempDir(t, 'record');
  return join(dir, 'perf.data');
}

test('stop() ends a recording cleanly with the samples perf wrote', async (t) => {
  if (!canRecord(t)) return;
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const output = await out(t);
  const recording = startRecord({ pid: node.pid, output });
  assert.equal(await recording.started, true);
  await sleep(1500);
  assert.equal(recording.finished, false);
  recording.stop('duration');
  const outcome = await recording.done;
  assert.equal(outcome.end, 'duration');
  assert.ok((outcome.samples ?? 0) > 0, outcome.stderrTail);
  assert.equal(recording.finished, true);
  assert.ok((await stat(output)).size > 0);
});

test('a target exiting ends the recording by itself', async (t) => {
  if (!canRecord(t)) return;
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const recording = startRecord({ pid: node.pid, output: await out(t) });
  assert.equal(await recording.started, true);
  await sleep(500);
  await node.kill();
  const outcome = await recording.done;
  assert.equal(outcome.end, 'target-exited');
});

test('a PID perf cannot attach to rejects with a PerfError keeping perf’s complaint', async (t) => {
  if (!needCommand(t, 'perf', 'linux-perf')) return;
  const gone = nonexistentPid();
  const recording = startRecord({ pid: gone, output: await out(t) });
  assert.equal(await recording.started, false);
  await assert.rejects(recording.done, (error) => {
    assert.ok(isProfcpuError(error, 'PERF_FAILED'));
    assert.match(error.message, new RegExp(`perf record .* -p ${gone} `));
    return true;
  });
});

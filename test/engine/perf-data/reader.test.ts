// The perf.data reader against perf itself: real recordings (a Node process recorded as collect records it, with
// build-ids in its mappings; the whole machine with a kernel-heavy workload; pipe mode) decode to exactly the events
// `perf script -D` delivers, in its order, with the same fields and raw callchains, whatever the size of the pieces
// the file is read in. Features come out as perf reports them.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createReadStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { readPerfDataFile, readPerfDataStream, type PerfEvent } from '../../../src/engine/perf-data/reader.js';
import { buildIdMmapWorks, recordArgs } from '../../../src/perf/record.js';
import { kernelRelease, perfVersion } from '../../../src/perf/version.js';
import { startNodeBurn } from '../../fixtures/node-burn/node-burn.js';
import { canRecord } from '../../support/requirements.js';
import { describe, perfDumpEvents } from './perf-dump.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-perfdata-'));
});
test.after(() => rm(dir, { recursive: true, force: true }));

async function ourEvents(path: string, chunkBytes?: number): Promise<string[]> {
  const events: string[] = [];
  await readPerfDataFile(path, { event: (e) => void events.push(describe(e)) }, { ...(chunkBytes && { chunkBytes }) });
  return events;
}

/** Our events and perf's, line by line; on a difference, the first few differing lines. */
function assertSameEvents(ours: string[], perfs: string[]): void {
  const differing = ours.flatMap((line, i) => (line === perfs[i] ? [] : [`#${i}\n ours ${line}\n perf ${perfs[i]}`]));
  assert.deepEqual(differing.slice(0, 5), [], `${differing.length} events differ`);
  assert.equal(ours.length, perfs.length);
}

test('a Node process recorded as collect records it: every event and callchain as perf script -D gives them', async (t) => {
  if (!canRecord(t)) return;
  const output = join(dir, 'node.data');
  const node = await startNodeBurn(20);
  t.after(() => node.kill());
  const buildIdMmap = buildIdMmapWorks(await perfVersion(), kernelRelease());
  const perf = spawn('perf', recordArgs({ pid: node.pid, output, frequency: 999, buildIdMmap }), { stdio: 'ignore' });
  await sleep(2500);
  perf.kill('SIGINT');
  await new Promise((resolve) => perf.once('exit', resolve));

  const perfs = await perfDumpEvents(output);
  assert.ok(perfs.filter((line) => line.includes(' SAMPLE ')).length > 100, 'too few samples to compare');
  assertSameEvents(await ourEvents(output), perfs);

  const mmaps: PerfEvent[] = [];
  const summary = await readPerfDataFile(output, { event: (e) => void (e.kind === 'mmap' && mmaps.push(e)) });
  const node2 = mmaps.find((e) => e.kind === 'mmap' && e.filename === process.execPath);
  assert.ok(node2, 'no mapping of the node binary');
  // With --buildid-mmap the mapping carries the build-id perf lists for the file.
  if (buildIdMmap) {
    const list = await execa('perf', ['buildid-list', '-i', output]);
    assert.ok(node2.kind === 'mmap' && list.stdout.includes(`${node2.buildId} ${process.execPath}`), list.stdout);
  }
  assert.deepEqual(
    summary.header.attrs.map((a) => a.name),
    (await execa('perf', ['evlist', '-i', output])).stdout.split('\n'),
  );
});

test('the whole machine under a kernel-heavy load: the same events as perf, read whole or in 7-byte pieces', async (t) => {
  if (!canRecord(t)) return;
  const output = join(dir, 'system.data');
  const load = 'dd if=/dev/zero of=/dev/null bs=4k count=200000; find /usr/share -name "*.gz" > /dev/null';
  await execa('perf', [
    'record',
    '-a',
    '-g',
    '-k',
    '1',
    '-e',
    'cpu-clock',
    '-F',
    '499',
    '-o',
    output,
    '--',
    'sh',
    '-c',
    load,
  ]);
  const perfs = await perfDumpEvents(output);
  assert.ok(
    perfs.some((line) => / SAMPLE .* ip ffffffff/.test(line)),
    'no kernel sample',
  );
  assertSameEvents(await ourEvents(output), perfs);
  assertSameEvents(await ourEvents(output, 7), perfs);

  const { header } = await readPerfDataFile(output, { event: () => {} });
  const info = (await execa('perf', ['report', '--header-only', '-i', output])).stdout;
  const fact = (name: string) => new RegExp(`^# ${name} : (.*)$`, 'm').exec(info)?.[1]?.trim();
  assert.equal(header.features.hostname, fact('hostname'));
  assert.equal(header.features.osRelease, fact('os release'));
  assert.equal(header.features.perfVersion, fact('perf version'));
  assert.equal(header.features.arch, fact('arch'));
  assert.equal(header.features.cpuDesc, fact('cpudesc'));
  assert.equal(String(header.features.nrCpusOnline), fact('nrcpus online'));
  assert.equal(header.features.cmdline?.join(' '), fact('cmdline'));
  const ids = (await execa('perf', ['buildid-list', '-i', output])).stdout;
  for (const entry of header.features.buildIds)
    assert.ok(ids.includes(`${entry.buildId} ${entry.filename}`), entry.filename);
  assert.ok(header.features.buildIds.length > 0);
});

test('pipe mode (perf record -o -): the same events as perf, from the file or streamed in small pieces', async (t) => {
  if (!canRecord(t)) return;
  const output = join(dir, 'pipe.data');
  await execa('sh', [
    '-c',
    `perf record -g -F 999 -o - -- dd if=/dev/urandom of=/dev/null bs=64k count=2000 > ${output}`,
  ]);
  const perfs = await perfDumpEvents(output);
  assert.ok(perfs.filter((line) => line.includes(' SAMPLE ')).length > 20, 'too few samples to compare');
  assertSameEvents(await ourEvents(output), perfs);

  const streamed: string[] = [];
  const summary = await readPerfDataStream(
    createReadStream(output, { highWaterMark: 13 }),
    { event: (e) => void streamed.push(describe(e)) },
    { name: 'pipe.data' },
  );
  assertSameEvents(streamed, perfs);
  assert.equal(summary.header.mode, 'pipe');
  assert.equal(summary.header.attrs[0]?.name, (await execa('perf', ['evlist', '-i', output])).stdout);
  assert.ok(summary.header.features.hostname);
});

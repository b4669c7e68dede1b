// A perf.data whose perf was killed (SIGKILL, as when the target's PID namespace ends): recovered to every whole
// record, readable by perf script, with the samples perf had written; and damaged or hostile files refused or cut
// at their first bad record, quickly.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { OutputFolder } from '../../src/files/output-folder.js';
import { perfDataState, recoverPerfData } from '../../src/perf/recover.js';
import { buildIdMmapWorks, recordArgs } from '../../src/perf/record.js';
import { kernelRelease, perfVersion } from '../../src/perf/version.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { canRecord } from '../support/requirements.js';
import { readPerfDataFile } from '../../src/engine/perf-data/reader.js';

/** User and system CPU seconds a process has used (/proc/PID/stat, 100 ticks a second). */
async function cpuSeconds(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function folderFor(t: TestContext) {
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-recover-'));
  const folder = await OutputFolder.open(dir);
  t.after(async () => {
    await folder.close();
    await rm(dir, { recursive: true, force: true });
  });
  return { dir, folder };
}

test('perf killed mid-recording: every sample it wrote is recovered and perf script reads them all', async (t) => {
  if (!canRecord(t)) return;
  const { dir, folder } = await folderFor(t);
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const buildIdMmap = buildIdMmapWorks(await perfVersion(), kernelRelease());
  const args = recordArgs({ pid: node.pid, output: join(dir, 'perf.data'), frequency: 499, buildIdMmap });
  const perf = spawn('perf', args, { stdio: 'ignore' });
  const cpuBefore = await cpuSeconds(node.pid);
  await sleep(2500);
  const exited = new Promise((resolve) => perf.once('exit', resolve));
  perf.kill('SIGKILL');
  const cpu = (await cpuSeconds(node.pid)) - cpuBefore;
  await exited;
  assert.equal(await perfDataState(folder, 'perf.data'), 'unfinished');

  const recovered = await recoverPerfData(folder, 'perf.data');
  assert.equal(await perfDataState(folder, 'perf.data'), 'finished');
  // 499 a second of the CPU time the burner had while perf ran (a busy machine gives it less than 2.5 s): most of
  // them, not a handful (perf's buffers not yet written when it was killed are lost).
  const expected = cpu * 499;
  assert.ok(
    recovered.samples !== undefined && recovered.samples > 20 && recovered.samples > expected / 2,
    `only ${recovered.samples} samples recovered, of about ${Math.round(expected)} (${cpu.toFixed(2)} s of CPU)`,
  );
  const { stdout } = await execa('perf', ['script', '-i', join(dir, 'perf.data')]);
  const scripted = stdout.split('\n').filter((line) => /^\S.* cpu-clock:/.test(line)).length;
  assert.equal(scripted, recovered.samples);
  // Build-ids came with the mappings: the recovered file still knows which node binary it sampled.
  if (buildIdMmap) {
    const list = await execa('perf', ['buildid-list', '--with-hits', '-i', join(dir, 'perf.data')]);
    assert.match(list.stdout, /^[0-9a-f]{40} \S*node/m);
  }
  assert.equal((await stat(join(dir, 'perf.data.recovering')).catch(() => undefined)) ?? 'gone', 'gone');
});

test('perf -z killed while recording stack copies: the compressed records it wrote are kept and read', async (t) => {
  // collect's mixed unwinding records so: DWARF call graphs, compressed. perf 6's COMPRESSED records are not padded
  // to 8 bytes: the walk must not take the first for a torn write.
  if (!canRecord(t)) return;
  const { dir, folder } = await folderFor(t);
  const node = await startNodeBurn(30);
  t.after(() => node.kill());
  const buildIdMmap = buildIdMmapWorks(await perfVersion(), kernelRelease());
  const output = join(dir, 'perf.data');
  const callGraph = { kind: 'dwarf', stackBytes: 8192 } as const;
  const args = recordArgs({ pid: node.pid, output, frequency: 499, buildIdMmap, callGraph, compress: true });
  const perf = spawn('perf', args, { stdio: 'ignore' });
  await sleep(2500);
  const exited = new Promise((resolve) => perf.once('exit', resolve));
  perf.kill('SIGKILL');
  await exited;
  assert.equal(await perfDataState(folder, 'perf.data'), 'unfinished');
  const recovered = await recoverPerfData(folder, 'perf.data');
  assert.equal(recovered.samples, undefined, 'samples inside compressed records are not counted by the walk');
  let ours = 0;
  await readPerfDataFile(output, { event: (e) => void (e.kind === 'sample' && ours++) });
  const { stdout } = await execa('perf', ['script', '-F', 'time', '-i', output]);
  const scripted = stdout.split('\n').filter((line) => line.trim() !== '').length;
  assert.ok(ours > 20, `only ${ours} samples recovered (${recovered.dataBytes} bytes of records)`);
  assert.equal(ours, scripted, 'the built-in reader and perf script read the same samples');
  t.diagnostic(`${ours} samples in ${recovered.dataBytes} bytes, ${recovered.cutBytes} cut`);
});

/** A file-mode header as perf writes it when it starts: one attribute of 136 bytes, data at 360, no data size. */
function header(overrides: { dataOffset?: bigint; attrSize?: bigint; magic?: string } = {}): Buffer {
  const bytes = Buffer.alloc(360);
  bytes.write(overrides.magic ?? 'PERFILE2', 0, 'latin1');
  bytes.writeBigUInt64LE(104n, 8);
  bytes.writeBigUInt64LE(overrides.attrSize ?? 152n, 16);
  bytes.writeBigUInt64LE(208n, 24);
  bytes.writeBigUInt64LE(152n, 32);
  bytes.writeBigUInt64LE(overrides.dataOffset ?? 360n, 40);
  bytes.writeBigUInt64LE(0n, 48);
  bytes.fill(0xff, 72, 80); // feature bits perf would set once finished
  return bytes;
}

function record(type: number, size: number): Buffer {
  const bytes = Buffer.alloc(size);
  bytes.writeUInt32LE(type, 0);
  bytes.writeUInt16LE(size, 6);
  return bytes;
}

test('a record cut short, zeros where perf stopped, or a bad size ends the data there', async (t) => {
  const { dir, folder } = await folderFor(t);
  const whole = [record(9, 48), record(3, 32), record(9, 48)];
  const file = Buffer.concat([header(), ...whole, record(9, 48).subarray(0, 20)]);
  await writeFile(join(dir, 'perf.data'), file);
  const recovered = await recoverPerfData(folder, 'perf.data');
  assert.deepEqual(recovered, { dataBytes: 128, samples: 2, cutBytes: 20 });
  const bytes = await readFile(join(dir, 'perf.data'));
  assert.equal(bytes.length, 360 + 128);
  assert.equal(bytes.readBigUInt64LE(48), 128n);
  assert.equal(bytes.readBigUInt64LE(72), 0n, 'no feature bit without its section');

  await writeFile(join(dir, 'perf.data'), Buffer.concat([header(), record(9, 48), Buffer.alloc(4096)]));
  assert.equal((await recoverPerfData(folder, 'perf.data')).samples, 1);
  await writeFile(join(dir, 'perf.data'), Buffer.concat([header(), record(9, 48), record(9, 12), record(9, 48)]));
  assert.equal((await recoverPerfData(folder, 'perf.data')).dataBytes, 48);
  // perf 6's COMPRESSED record is unpadded: the walk goes on after it, and leaves its samples uncounted.
  const unpadded = [record(9, 48), record(81, 37), record(9, 48)];
  await writeFile(join(dir, 'perf.data'), Buffer.concat([header(), ...unpadded, record(81, 40).subarray(0, 30)]));
  assert.deepEqual(await recoverPerfData(folder, 'perf.data'), { dataBytes: 133, samples: undefined, cutBytes: 30 });
});

test('hostile headers are refused, not followed', async (t) => {
  const { dir, folder } = await folderFor(t);
  const cases: [string, Buffer, RegExp][] = [
    ['no magic', Buffer.concat([Buffer.alloc(360), record(9, 48)]), /no PERFILE2 magic/],
    ['big-endian', header({ magic: '2ELIFREP' }), /big-endian/],
    ['data beyond 2^53', header({ dataOffset: 1n << 62n }), /data offset/],
    ['attributes of 8 bytes', header({ attrSize: 8n }), /attributes of 8 bytes/],
    ['data inside the header', header({ dataOffset: 64n }), /data offset/],
  ];
  for (const [name, bytes, message] of cases) {
    await writeFile(join(dir, 'perf.data'), bytes);
    assert.equal(await perfDataState(folder, 'perf.data'), 'unreadable', name);
    await assert.rejects(recoverPerfData(folder, 'perf.data'), message, name);
  }
});

test('the attacker’s case: 64 MiB of the smallest records is walked in bounded time and memory', async (t) => {
  const { dir, folder } = await folderFor(t);
  const records = Buffer.alloc(64 << 20);
  for (let at = 0; at < records.length; at += 8) records.writeUInt16LE(8, at + 6);
  await writeFile(join(dir, 'perf.data'), Buffer.concat([header(), records]));
  const started = performance.now();
  const recovered = await recoverPerfData(folder, 'perf.data');
  assert.equal(recovered.dataBytes, 64 << 20);
  // A deadline, not a timing assertion: a walk that hung or went quadratic would take minutes.
  assert.ok(performance.now() - started < 60_000);
});

test('the finished file keeps the recording’s times, so a rerun of postprocess dates its tarball the same', async (t) => {
  const { dir, folder } = await folderFor(t);
  await writeFile(join(dir, 'perf.data'), Buffer.concat([header(), record(9, 48), record(9, 48).subarray(0, 20)]));
  const recorded = new Date('2026-11-24T10:00:00Z');
  await utimes(join(dir, 'perf.data'), recorded, recorded);
  await recoverPerfData(folder, 'perf.data');
  assert.equal((await stat(join(dir, 'perf.data'))).mtimeMs, recorded.getTime());
});

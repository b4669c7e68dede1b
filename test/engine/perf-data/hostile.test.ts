// The perf.data reader on damaged and hostile files: every prefix of a real recording (file and pipe mode), a few
// hundred copies with random bytes changed, and forged sizes and counts. Each read must end quickly, either with
// events or with a BAD_INPUT ProfcpuError: never another exception, a hang or a huge allocation.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { before, test } from 'node:test';
import { execa } from 'execa';
import { isProfcpuError } from '../../../src/error.js';
import { readPerfDataFile, readPerfDataStream } from '../../../src/engine/perf-data/reader.js';
import { have, isRoot } from '../../support/requirements.js';
import { forgedPerfData } from './forged.js';

let dir: string;
let fileMode: Buffer | undefined;
let pipeMode: Buffer | undefined;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-perfdata-hostile-'));
  if (!isRoot() || !have('perf')) return;
  const load = ['--', 'dd', 'if=/dev/urandom', 'of=/dev/null', 'bs=64k', 'count=300'];
  await execa('perf', ['record', '-g', '-F', '999', '-o', join(dir, 'file.data'), ...load]);
  await execa('sh', ['-c', `perf record -g -F 999 -o - ${load.join(' ')} > ${join(dir, 'pipe.data')}`]);
  fileMode = await readFile(join(dir, 'file.data'));
  pipeMode = await readFile(join(dir, 'pipe.data'));
});
test.after(() => rm(dir, { recursive: true, force: true }));

/** Reads `bytes` as a file; resolves 'ok' or 'refused', rejects on anything else or after 5 s. */
async function readHostile(bytes: Buffer, name = 'hostile.data'): Promise<'ok' | 'refused'> {
  const path = join(dir, name);
  await writeFile(path, bytes);
  let events = 0;
  const reading = readPerfDataFile(path, { event: () => void events++ }).then(
    () => 'ok' as const,
    (error: unknown) => {
      if (isProfcpuError(error, 'BAD_INPUT')) return 'refused' as const;
      throw error;
    },
  );
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: still reading after 5 s`)), 5000);
  });
  try {
    return await Promise.race([reading, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** A deterministic generator (mulberry32), so a failing case can be replayed. */
function random(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

test('every prefix of a file-mode and a pipe-mode recording is read or refused as BAD_INPUT', async (t) => {
  if (!fileMode || !pipeMode) return t.skip('needs root and perf to record');
  for (const whole of [fileMode, pipeMode]) {
    const step = Math.max(1, Math.floor(whole.length / 400));
    const outcomes = new Set<string>();
    for (let length = 0; length < whole.length; length += step)
      outcomes.add(await readHostile(whole.subarray(0, length)));
    assert.ok(outcomes.has('refused'));
  }
  // A pipe cut between records is a shorter recording, not a damaged one (once it named its events).
  const firstRecord = 16 + pipeMode.readUInt16LE(16 + 6);
  assert.equal(await readHostile(pipeMode.subarray(0, firstRecord)), 'ok');
});

test('random bytes changed in 300 copies: each is read or refused, quickly', async (t) => {
  if (!fileMode || !pipeMode) return t.skip('needs root and perf to record');
  const next = random(13);
  for (let i = 0; i < 300; i++) {
    const whole = i % 2 === 0 ? fileMode : pipeMode;
    const copy = Buffer.from(whole);
    const flips = 1 + Math.floor(next() * 8);
    for (let f = 0; f < flips; f++) copy[Math.floor(next() * copy.length)] = Math.floor(next() * 256);
    await readHostile(copy, `flip-${i}.data`);
  }
});

/** A file-mode header: one attribute (sample_type IP|TID|TIME|CALLCHAIN), no ids, the data after it. */
function forgedFile(data: Buffer, patch: (bytes: Buffer) => void = () => {}): Buffer {
  return forgedPerfData(data, 0x27n, patch);
}

function sample(nr: bigint, entries = 0): Buffer {
  const bytes = Buffer.alloc(8 + 8 + 8 + 8 + 8 + entries * 8);
  bytes.writeUInt32LE(9, 0);
  bytes.writeUInt16LE(bytes.length, 6);
  bytes.writeBigUInt64LE(nr, 32);
  return bytes;
}

test('forged sizes and counts are refused at once, before anything of their size is allocated', async () => {
  assert.equal(await readHostile(forgedFile(sample(2n, 2))), 'ok');
  const refused: Record<string, Buffer> = {
    'a callchain longer than its record': forgedFile(sample(1n << 60n, 2)),
    'a record of size 0': forgedFile(Buffer.alloc(64)),
    'a record past the data': forgedFile(sample(0n), (h) => h.writeBigUInt64LE(1000n, 48)),
    'attributes by the billion': forgedFile(sample(0n), (h) => h.writeBigUInt64LE(152n << 30n, 32)),
    'an attribute of 1 GiB': forgedFile(sample(0n), (h) => h.writeBigUInt64LE(1n << 30n, 16)),
    'ids past the file': forgedFile(sample(0n), (h) => {
      h.writeBigUInt64LE(0n, 104 + 136);
      h.writeBigUInt64LE(1n << 40n, 104 + 144);
    }),
    'a data offset of 2^63': forgedFile(sample(0n), (h) => h.writeBigUInt64LE(1n << 63n, 40)),
    'compressed records': forgedFile(Buffer.from([81, 0, 0, 0, 0, 0, 16, 0, ...Buffer.alloc(8)])),
    'no magic': Buffer.alloc(200),
  };
  for (const [what, bytes] of Object.entries(refused)) assert.equal(await readHostile(bytes), 'refused', what);
});

test('a forged pipe: huge attribute, tracing data longer than the stream, an endless stream cut by its signal', async () => {
  const pipeHeader = Buffer.alloc(16);
  pipeHeader.write('PERFILE2', 0, 'latin1');
  pipeHeader.writeBigUInt64LE(16n, 8);
  const attrRecord = (attrSize: number) => {
    const bytes = Buffer.alloc(8 + 136);
    bytes.writeUInt32LE(64, 0);
    bytes.writeUInt16LE(bytes.length, 6);
    bytes.writeUInt32LE(attrSize, 12);
    return bytes;
  };
  const tracing = Buffer.alloc(16);
  tracing.writeUInt32LE(66, 0);
  tracing.writeUInt16LE(16, 6);
  tracing.writeUInt32LE(0xffffffff, 8);
  assert.equal(await readHostile(Buffer.concat([pipeHeader, attrRecord(136)])), 'ok');
  assert.equal(await readHostile(Buffer.concat([pipeHeader, attrRecord(60000)])), 'refused');
  assert.equal(await readHostile(Buffer.concat([pipeHeader, attrRecord(136), tracing])), 'refused');

  // A writer that never stops (FINISHED_ROUND records forever): the reader stops at the signal.
  const round = Buffer.from([68, 0, 0, 0, 0, 0, 8, 0]);
  const endless = Readable.from(
    (function* () {
      yield Buffer.concat([pipeHeader, attrRecord(136)]);
      for (;;) yield Buffer.concat(Array.from({ length: 1024 }, () => round));
    })(),
  );
  await assert.rejects(
    readPerfDataStream(endless, { event: () => {} }, { name: 'endless', signal: AbortSignal.timeout(300) }),
    (error) => isProfcpuError(error, 'ABORTED'),
  );
});

// Compressed recordings (perf record -z): the reader gives the same events as from the same recording made plain,
// and forged zstd streams end fast in a BAD_INPUT (or NEEDS_PERF for a window too large to decode here): a frame asking
// a 2 GiB window, a dictionary, a reserved block, a bomb, a flood of tiny blocks. The decompressor (fzstd) allocates
// what a frame header asks and moves its whole window per block: what compressed.ts checks before it sees them.
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, test } from 'node:test';
import { execa } from 'execa';
import { isProfcpuError } from '../../../src/error.js';
import {
  CompressedRecords,
  compressedLimits,
  decodeAhead,
  CompressedStreamError,
  zstdStartError,
} from '../../../src/engine/perf-data/compressed.js';
import { recordType, sampleBit } from '../../../src/engine/perf-data/format.js';
import { readPerfDataFile, type PerfEvent } from '../../../src/engine/perf-data/reader.js';
import { canRecord } from '../../support/requirements.js';
import { forgedPerfData } from './forged.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-compressed-'));
});
test.after(() => rm(dir, { recursive: true, force: true }));

/** The events read from `path`, as comparable text (offsets left out: they differ between the two files). */
async function eventsOf(path: string): Promise<string[]> {
  const out: string[] = [];
  await readPerfDataFile(path, {
    event(event: PerfEvent) {
      const { offset: _offset, ...rest } = event;
      out.push(
        JSON.stringify(rest, (_key, value: unknown) =>
          typeof value === 'bigint' ? `${value}n` : value instanceof BigUint64Array ? [...value].map(String) : value,
        ),
      );
    },
  });
  return out;
}

test('perf record -z: the same events as perf inject makes of it uncompressed, in the same order', async (t) => {
  if (!canRecord(t)) return;
  const compressed = join(dir, 'z.data');
  const load = ['dd', 'if=/dev/urandom', 'of=/dev/null', 'bs=64k', 'count=2000'];
  await execa('perf', ['record', '-z', '-g', '-F', '999', '-o', compressed, '--', ...load]);
  const bytes = await readFile(compressed);
  assert.ok(bytes.includes(Buffer.from([0x28, 0xb5, 0x2f, 0xfd])), 'the recording holds a zstd stream');
  // perf script reads the compressed file; perf report --stdio -D lists what it decompressed: the same samples.
  const events = await eventsOf(compressed);
  const samples = events.filter((e) => e.includes('"kind":"sample"')).length;
  const { stdout } = await execa('perf', ['script', '-i', compressed, '-F', 'time'], { reject: false });
  const perfSamples = stdout.split('\n').filter((line) => line.trim() !== '').length;
  assert.ok(samples > 50, `${samples} samples`);
  assert.equal(samples, perfSamples, 'as many samples as perf script prints');
  t.diagnostic(`${samples} samples from ${bytes.length} bytes`);
});

/** A COMPRESSED record (type 81) holding `payload`. */
function compressedRecord(payload: Buffer): Buffer {
  const record = Buffer.alloc(8 + payload.length);
  record.writeUInt32LE(recordType.compressed, 0);
  record.writeUInt16LE(record.length, 6);
  payload.copy(record, 8);
  return record;
}

/** A FINISHED_ROUND record: 8 bytes, a header alone. */
function finishedRound(): Buffer {
  const record = Buffer.alloc(8);
  record.writeUInt32LE(recordType.finishedRound, 0);
  record.writeUInt16LE(8, 6);
  return record;
}

/** A zstd frame header: magic, descriptor, window descriptor. */
function frameHeader(windowLog: number, descriptor = 0): Buffer {
  return Buffer.from([0x28, 0xb5, 0x2f, 0xfd, descriptor, (windowLog - 10) << 3]);
}

/** A raw zstd block of `bytes`. */
function rawBlock(bytes: Buffer, last = false): Buffer {
  const header = (bytes.length << 3) | (last ? 1 : 0);
  return Buffer.concat([Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), bytes]);
}

/** An RLE zstd block repeating `byte` `size` times. */
function rleBlock(size: number, byte: number): Buffer {
  const header = (size << 3) | (1 << 1);
  return Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16, byte]);
}

/** Reads a forged file whose data is `records`: 'ok', or the error's code; fails past `ms`. */
async function readForged(name: string, records: Buffer[], ms = 5000): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, forgedPerfData(Buffer.concat(records), sampleBit.ip | sampleBit.tid));
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${name}: still reading after ${ms} ms`)), ms);
  });
  const reading = readPerfDataFile(path, { event: () => {} }).then(
    () => 'ok',
    (error: unknown) => {
      if (isProfcpuError(error)) return error.code;
      throw error;
    },
  );
  try {
    return await Promise.race([reading, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

test('a compressed record holding whole records is read as those records', async (t) => {
  // A FINISHED_ROUND record, compressed as one raw block.
  const inner = finishedRound();
  const decoder = new CompressedRecords();
  t.after(() => decoder.close());
  const records = await decoder.take(
    Buffer.concat([frameHeader(19), rawBlock(Buffer.concat([inner, inner]), true)]),
    0,
  );
  assert.equal(records.length, 2);
  assert.equal(decoder.pending, 0);
  // A record cut by the end of a payload is completed by the next one.
  // (fzstd holds a frame's first 18 bytes back: this payload is longer.)
  const split = new CompressedRecords();
  t.after(() => split.close());
  const first = await split.take(
    Buffer.concat([frameHeader(19), rawBlock(Buffer.concat([inner, inner.subarray(0, 5)]))]),
    0,
  );
  assert.equal(first.length, 1);
  assert.equal(split.pending, 5);
  assert.equal((await split.take(rawBlock(inner.subarray(5), true), 1)).length, 1);
  assert.equal(split.pending, 0);
  assert.equal(
    await readForged('plain.data', [compressedRecord(Buffer.concat([frameHeader(19), rawBlock(inner)]))]),
    'ok',
  );
  // Compressed data that ends inside a record (a recording cut short): the whole records are read, the rest left
  // unread, as perf leaves it.
  const cut = compressedRecord(
    Buffer.concat([frameHeader(19), rawBlock(Buffer.concat([inner, inner.subarray(0, 5)]))]),
  );
  assert.equal(await readForged('cut.data', [cut]), 'ok');
});

test('forged zstd streams are refused before they cost memory or time', async () => {
  const cases: [string, Buffer[], string][] = [
    // fzstd would allocate a 2 GiB window, and move it per block.
    [
      'a 2 GiB window',
      [compressedRecord(Buffer.concat([frameHeader(31), rawBlock(Buffer.alloc(8), true)]))],
      'NEEDS_PERF',
    ],
    [
      'an 8 MiB window (level 19)',
      [compressedRecord(Buffer.concat([frameHeader(23), rawBlock(Buffer.alloc(8))]))],
      'NEEDS_PERF',
    ],
    ['a dictionary', [compressedRecord(Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x01, 0x48, 0x07, 0, 0, 0]))], 'BAD_INPUT'],
    ['no zstd magic', [compressedRecord(Buffer.alloc(16, 0x41))], 'BAD_INPUT'],
    [
      'a reserved block type',
      [compressedRecord(Buffer.concat([frameHeader(19), Buffer.from([0x07, 0, 0, 0])]))],
      'BAD_INPUT',
    ],
    [
      'a bomb: 128 KiB RLE blocks from 4 bytes each',
      [
        compressedRecord(
          Buffer.concat([frameHeader(19), ...Array.from({ length: 4000 }, () => rleBlock(128 << 10, 0))]),
        ),
      ],
      'BAD_INPUT',
    ],
    [
      'a flood of 1-byte blocks',
      [
        compressedRecord(
          Buffer.concat([frameHeader(19), ...Array.from({ length: 16000 }, () => rawBlock(Buffer.from([8])))]),
        ),
      ],
      'BAD_INPUT',
    ],
  ];
  for (const [name, records, expected] of cases) {
    const started = performance.now();
    assert.equal(await readForged(`${name.replace(/\W+/g, '-')}.data`, records), expected, name);
    assert.ok(performance.now() - started < 5000, name);
  }
});

test('the window limit stands between perf’s levels 1 to 7 and the larger ones', () => {
  assert.equal(compressedLimits.maxWindowBytes, 2 << 20);
  const error = zstdStartError(Buffer.concat([frameHeader(22), rawBlock(Buffer.alloc(8))]));
  assert.ok(error instanceof CompressedStreamError && error.tooLargeWindow);
  assert.equal(zstdStartError(Buffer.concat([frameHeader(21), rawBlock(Buffer.alloc(8))])), undefined);
});

test('a block whose sequences run for minutes (fzstd runs each to its end) is stopped at the deadline', async () => {
  // No literals, 98 047 sequences with RLE tables and match-length code 52: 12 bytes that took fzstd 77 s.
  const body = Buffer.from([0x00, 0xff, 0xff, 0xff, 0x54, 0x00, 0x00, 52, 0x01]);
  const header = (body.length << 3) | (2 << 1);
  const block = Buffer.concat([Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), body]);
  const path = join(dir, 'slow.data');
  await writeFile(path, forgedPerfData(compressedRecord(Buffer.concat([frameHeader(19), block])), sampleBit.ip));
  const started = performance.now();
  await assert.rejects(readPerfDataFile(path, { event: () => {} }, { decodeDeadlineMs: 1000 }), (error: unknown) => {
    assert.ok(isProfcpuError(error, 'BAD_INPUT'));
    assert.match(error.message, /takes over 1000 ms to decode/);
    return true;
  });
  assert.ok(performance.now() - started < 5000);
  // Ctrl-C stops it too.
  const controller = new AbortController();
  setTimeout(() => controller.abort(), 200);
  await assert.rejects(readPerfDataFile(path, { event: () => {} }, { signal: controller.signal }), (error: unknown) =>
    isProfcpuError(error, 'ABORTED'),
  );
});

test('many small compressed records, each a block (perf record -z --no-buffering), are read in time', async (t) => {
  const inner = finishedRound();
  const records = [compressedRecord(Buffer.concat([frameHeader(21), rawBlock(inner)]))];
  for (let i = 0; i < 20000; i++) records.push(compressedRecord(rawBlock(inner, i === 19999)));
  const started = performance.now();
  assert.equal(await readForged('small-records.data', records, 20_000), 'ok');
  t.diagnostic(`20 000 records of one block each (2 MiB window): ${Math.round(performance.now() - started)} ms`);
});

test('payloads given ahead are decoded while earlier ones are handled, and taken in their order', async (t) => {
  const inner = finishedRound();
  const decoder = new CompressedRecords();
  t.after(() => decoder.close());
  const payloads = [
    Buffer.concat([frameHeader(19), rawBlock(Buffer.concat([inner, inner]))]),
    rawBlock(Buffer.concat([inner, inner.subarray(0, 3)])),
    rawBlock(Buffer.concat([inner.subarray(3), inner])),
    rawBlock(inner, true),
  ];
  const first = decoder.take(payloads[0]!, 0);
  assert.equal(decoder.room, decodeAhead);
  for (let i = 1; i < payloads.length; i++) decoder.ahead(payloads[i]!, i * 100);
  assert.equal(decoder.room, 0, 'no more than decodeAhead ahead');
  assert.equal((await first).length, 2);
  assert.equal((await decoder.take(payloads[1]!, 100)).length, 1);
  assert.equal(decoder.pending, 3);
  assert.equal((await decoder.take(payloads[2]!, 200)).length, 2);
  assert.equal((await decoder.take(payloads[3]!, 300)).length, 1);
  assert.equal(decoder.pending, 0);
  assert.equal(decoder.room, decodeAhead);
});

test('a forged payload given ahead fails the read at its turn, within the deadline', async () => {
  const inner = finishedRound();
  const good = [compressedRecord(Buffer.concat([frameHeader(19), rawBlock(inner)])), compressedRecord(rawBlock(inner))];
  assert.equal(
    await readForged('reserved-ahead.data', [...good, compressedRecord(Buffer.from([0x07, 0, 0, 0]))]),
    'BAD_INPUT',
  );
  // The 77-second block of the test above, given ahead behind two good records: stopped at its deadline.
  const body = Buffer.from([0x00, 0xff, 0xff, 0xff, 0x54, 0x00, 0x00, 52, 0x01]);
  const header = (body.length << 3) | (2 << 1);
  const block = Buffer.concat([Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), body]);
  const path = join(dir, 'slow-ahead.data');
  await writeFile(path, forgedPerfData(Buffer.concat([...good, compressedRecord(block)]), sampleBit.ip));
  const started = performance.now();
  await assert.rejects(
    readPerfDataFile(path, { event: () => {} }, { decodeDeadlineMs: 1000 }),
    (error: unknown) => isProfcpuError(error, 'BAD_INPUT') && /takes over 1000 ms/.test(error.message),
  );
  assert.ok(performance.now() - started < 5000);
});

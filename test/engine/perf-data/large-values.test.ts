// Values past 2^53 in a perf.data: the reader and the perf-script writer carry the bulk of the times, periods and
// addresses as numbers, and these as bigints. They are real (perf's times are ns since boot: a server up more than 104
// days; the vsyscall page lies past 2^53) and must stay exact: ordered, printed and looked up as the smaller ones.
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { context } from '../../../src/engine/perf-data/format.js';
import { TimeOrder } from '../../../src/engine/perf-data/order.js';
import { readPerfDataFile, type PerfEvent } from '../../../src/engine/perf-data/reader.js';
import type { PerfTime } from '../../../src/engine/perf-data/records.js';
import { ScriptTextWriter, type ScriptFrame } from '../../../src/engine/script-text.js';
import { forgedPerfData } from './forged.js';
import { tempDir } from '../../support/temp.js';

const twoTo53 = 1n << 53n;
/** IP | TID | TIME | CALLCHAIN | CPU | PERIOD. */
const sampleType = 0x1a7n;

/** A file-mode perf.data: one cpu-clock attribute of `sampleType`, no ids, no features, `records` as its data. */
function perfData(records: Buffer[]): Buffer {
  return forgedPerfData(Buffer.concat(records), sampleType);
}

function record(type: number, misc: number, body: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32LE(type, 0);
  head.writeUInt16LE(misc, 4);
  head.writeUInt16LE(8 + body.length, 6);
  return Buffer.concat([head, body]);
}

function u64s(...values: bigint[]): Buffer {
  const bytes = Buffer.alloc(values.length * 8);
  values.forEach((value, i) => bytes.writeBigUInt64LE(value, i * 8));
  return bytes;
}

const pid = 4242;
const pidTid = (BigInt(pid) << 32n) | BigInt(pid);

function sample(time: bigint, period: bigint, chain: bigint[]): Buffer {
  // ip, pid/tid, time, cpu (1), period, nr, entries: a user-mode sample.
  return record(9, 2, u64s(chain.at(-1)!, pidTid, time, 1n, period, BigInt(chain.length), ...chain));
}

function mmap(start: bigint, length: bigint, pgoff: bigint, filename: string): Buffer {
  const name = Buffer.alloc(Math.ceil((filename.length + 1) / 8) * 8);
  name.write(filename);
  return record(1, 2, Buffer.concat([u64s(pidTid, start, length, pgoff), name]));
}

function comm(name: string): Buffer {
  return record(3, 0, Buffer.concat([u64s(pidTid), Buffer.from(`${name}\0\0\0\0\0\0\0\0`.slice(0, 8))]));
}

/** `seconds.micros` of a time in ns, by bigint arithmetic. */
function stamp(time: bigint): string {
  return `${String(time / 1_000_000_000n).padStart(5)}.${String((time % 1_000_000_000n) / 1000n).padStart(6, '0')}`;
}

test('times on both sides of 2^53 are ordered as perf orders them (ties in arrival order) and printed exactly', async (t) => {
  const dir = await tempDir(t, 'large-values');
  // A mapping across 2^53, one in the vsyscall page's place, one low: frames in each, on both sides of 2^53.
  const across = twoTo53 - 0x1000n;
  const top = 0xffffffffff600000n;
  const chain = [context.user, twoTo53 + 0x10n, twoTo53 - 0x10n, top + 0x24n, 0x400010n];
  // Arrival order; the period tells each sample apart in the text.
  const samples: [time: bigint, period: bigint][] = [
    [twoTo53 + 1_000_001_000n, 1n],
    [twoTo53 - 1n, 2n],
    [twoTo53 + 3n, 3n],
    [5_000_000_000n, 6n],
    [twoTo53 + 3n, 4n],
    [(1n << 64n) - 2n, 1n << 60n],
  ];
  const path = join(dir, 'perf.data');
  await writeFile(
    path,
    perfData([
      comm('app'),
      mmap(across, 0x2000n, 0x7000n, '/forged/across'),
      mmap(top, 0x1000n, 0n, '/forged/top'),
      mmap(0x400000n, 0x1000n, 0x200n, '/forged/low'),
      ...samples.map(([time, period]) => sample(time, period, chain)),
    ]),
  );

  const times: PerfTime[] = [];
  const offsets: bigint[] = [];
  const text: string[] = [];
  const firstFrames: ScriptFrame[] = [];
  const writer = new ScriptTextWriter(
    {
      kernel: () => undefined,
      file: (mapping, offset) => {
        offsets.push(offset);
        return { name: `in_${mapping.path.slice(8)}`, offset: offset & 0xfn };
      },
    },
    {
      header: () => {},
      sample: (header, frames, count) => {
        firstFrames.push(frames[0]!);
        text.push(header, ...frames.slice(0, count).map((frame) => frame.line));
      },
      oneLine: () => assert.fail('a sample with a callchain printed on one line'),
    },
  );
  await readPerfDataFile(path, {
    header: (header) => writer.header(header),
    event: (event: PerfEvent) => {
      if (event.kind === 'sample') times.push(event.time!);
      return writer.event(event);
    },
  });

  const order = [3, 1, 2, 4, 0, 5].map((i) => samples[i]!);
  assert.deepEqual(
    times.map((time) => BigInt(time)),
    order.map(([time]) => time),
  );
  // Each distinct frame is looked up once, at its offset in its file, then given again.
  assert.deepEqual(offsets, [0x7000n + 0x1010n, 0x7000n + 0xff0n, 0x24n, 0x210n]);
  assert.ok(firstFrames.every((frame) => frame === firstFrames[0]));
  const frameLines = [
    `\t${(0x7000n + 0x1010n).toString(16).padStart(16)} in_across+0x0 (/forged/across)`,
    `\t${(0x7000n + 0xff0n).toString(16).padStart(16)} in_across+0x0 (/forged/across)`,
    `\t${0x24n.toString(16).padStart(16)} in_top+0x4 (/forged/top)`,
    `\t${0x210n.toString(16).padStart(16)} in_low+0x0 (/forged/low)`,
  ];
  assert.deepEqual(
    text,
    order.flatMap(([time, period]) => [
      `app  ${pid} [001] ${stamp(time)}: ${String(period).padStart(10)} cpu-clock: `,
      ...frameLines,
    ]),
  );
});

test('the time-ordering queue orders numbers and bigints together, exactly', async () => {
  const delivered: number[] = [];
  const order = new TimeOrder<number>((event) => void delivered.push(event));
  const times: PerfTime[] = [twoTo53 + 2n, Number(twoTo53 - 1n), twoTo53, 7, twoTo53 + 2n, twoTo53 + 1n, 7];
  for (const [i, time] of times.entries()) await order.push(time, i);
  await order.finish();
  assert.deepEqual(delivered, [3, 6, 1, 2, 5, 0, 4]);
});

test('a record longer than its fields, which leaves the chunk read an odd length, is read as perf reads it', async (t) => {
  const dir = await tempDir(t, 'large-values');
  // The last sample's size field says 2 bytes more than its fields: the data section, hence the one chunk read, is
  // no whole number of words, and the first sample's callchain is a view of it.
  const padded = (bytes: Buffer) => {
    const out = Buffer.concat([bytes, Buffer.alloc(2)]);
    out.writeUInt16LE(out.length, 6);
    return out;
  };
  const chain = [context.user, 0x400010n, 0x400020n];
  const path = join(dir, 'perf.data');
  await writeFile(
    path,
    perfData([
      comm('app'),
      mmap(0x400000n, 0x1000n, 0n, '/forged/low'),
      sample(5_000_000_000n, 1n, chain),
      padded(sample(6_000_000_000n, 1n, chain)),
    ]),
  );
  const lines: string[] = [];
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: () => ({ name: 'f', offset: 0n }) },
    {
      header: () => {},
      sample: (header, frames, count) => void lines.push(header, ...frames.slice(0, count).map((f) => f.line)),
      oneLine: () => assert.fail('a sample with a callchain printed on one line'),
    },
  );
  await readPerfDataFile(path, { header: (header) => writer.header(header), event: (event) => writer.event(event) });
  assert.equal(lines.length, 6, lines.join('\n'));
  assert.equal(lines.filter((line) => line.includes('f+0x0 (/forged/low)')).length, 4, lines.join('\n'));
});

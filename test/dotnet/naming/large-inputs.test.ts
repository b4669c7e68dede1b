import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { test, type TestContext } from 'node:test';
import { loadFolderResolver } from '../../../src/dotnet/naming/folder-resolver.js';
import { unloggedStubName } from '../../../src/dotnet/naming/resolver.js';
import { tempDir } from '../../support/temp.js';

// Output folders as big services leave them: perf maps and jitdumps of hundreds of thousands of methods, which once
// overflowed the stack (`push(...entries)`) or were silently dropped. Every address is a function of the entry's
// number, so the expected name of any frame is known without a second copy of the data.
const codeHeap = 0x7f20_0000_0000;
const slot = 0x100;
const dll = { start: 0x7f80_0000_0000, path: '/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/System.Linq.dll' };

// Names as prefix, number, suffix: written as bytes, as a million template strings take seconds.
const jitParts = [
  'instance void [App.Orders] App.Orders.Handlers.OrderHandler::Handle',
  '(int32,string)[OptimizedTier1]',
];
const r2rParts = ['bool [System.Linq] System.Linq.Enumerable::Any', '(class IEnumerable`1<!!0>)[PreJIT]'];
const jitName = (i: number) => `${jitParts[0]}${i}${jitParts[1]}`;
const r2rName = (k: number) => `${r2rParts[0]}${k}${r2rParts[1]}`;

/** Perf-map entry i: its own slot, except that one in 1000 is logged again over part of the entry 500 before it. */
function jitRange(i: number): { start: number; size: number } {
  if (i % 1000 === 999) return { start: codeHeap + (i - 500) * slot + 0x20, size: 0x40 };
  return { start: codeHeap + i * slot, size: 0x80 + (i % 0x70) };
}
const r2rRange = (k: number) => ({ start: dll.start + k * 0x80, size: 0x40 });

/** ASCII text, numbers and little-endian integers appended to a buffer (byte by byte: a million lines are written). */
class ByteWriter {
  at = 0;
  constructor(public bytes: Buffer) {}

  text(text: string): this {
    for (let k = 0; k < text.length; k++) this.bytes[this.at++] = text.charCodeAt(k);
    return this;
  }

  number(n: number, radix: 10 | 16): this {
    let digits = 1;
    for (let rest = Math.floor(n / radix); rest > 0; rest = Math.floor(rest / radix)) digits++;
    this.at += digits;
    for (let k = 1; k <= digits; k++, n = Math.floor(n / radix)) this.bytes[this.at - k] = hexDigits[n % radix]!;
    return this;
  }

  /** Up to 2^53, as u64. */
  u64(n: number): this {
    this.bytes.writeUInt32LE(n % 2 ** 32, this.at);
    this.bytes.writeUInt32LE(Math.floor(n / 2 ** 32), this.at + 4);
    this.at += 8;
    return this;
  }
}
const hexDigits = Buffer.from('0123456789abcdef');

/**
 * A folder with a perf map of `entries` lines (and a last line cut short) and a jitdump of `records` records: even
 * ones repeat the perf map's entries in order, as the runtime writes them, odd ones are ReadyToRun methods.
 */
async function outputFolder(t: TestContext, entries: number, records: number) {
  const dir = await tempDir(t, 'large-inputs');
  await mkdir(join(dir, 'target'));
  const map = new ByteWriter(Buffer.alloc(entries * 160));
  for (let i = 0; i < entries; i++) {
    const { start, size } = jitRange(i);
    map.text('0x').number(start, 16).text(' ').number(size, 16).text(' ');
    map.text(jitParts[0]!).number(i, 10).text(jitParts[1]!).text('\n');
  }
  map
    .text('0x')
    .number(codeHeap + entries * slot, 16)
    .text(' 8'); // still being written when copied
  await writeFile(join(dir, 'target/perf-1.map'), map.bytes.subarray(0, map.at));

  const dump = new ByteWriter(Buffer.alloc(records * 160));
  dump.u64(0x0000_0001_4a69_5444).u64(0x0000_003e_0000_0028).u64(0).u64(0).u64(0);
  for (let k = 0; k < records; k++) {
    const { start, size } = k % 2 ? r2rRange(k >> 1) : jitRange(k >> 1);
    const [prefix, suffix] = k % 2 ? r2rParts : jitParts;
    const record = dump.at;
    dump
      .u64(0)
      .u64(0)
      .u64(0)
      .u64(start)
      .u64(start)
      .u64(size)
      .u64(k + 1);
    dump
      .text(prefix!)
      .number(k >> 1, 10)
      .text(suffix!)
      .text('\0');
    dump.bytes.writeUInt32LE(dump.at - record, record + 4);
  }
  await writeFile(join(dir, 'target/jit-1.dump'), dump.bytes.subarray(0, dump.at));

  const heapEnd = (codeHeap + (entries + 1) * slot).toString(16);
  const dllEnd = (dll.start + (records / 2 + 1) * 0x80).toString(16);
  await writeFile(
    join(dir, 'target/maps'),
    `${codeHeap.toString(16)}-${heapEnd} rwxp 00000000 00:00 0 \n` +
      `${dll.start.toString(16)}-${dllEnd} r-xp 00000000 fe:00 77 ${dll.path}\n`,
  );
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 4321, nspid: 1, runtime: 'dotnet' }));
  return dir;
}

async function checkFolder(t: TestContext, entries: number, records: number) {
  let started = performance.now();
  const dir = await outputFolder(t, entries, records);
  const written = performance.now() - started;
  started = performance.now();
  const warnings: string[] = [];
  const loaded = await loadFolderResolver(dir, (m) => warnings.push(m));
  t.diagnostic(
    `written in ${(written / 1000).toFixed(1)} s, loaded in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  assert.ok(loaded);
  assert.deepEqual(warnings, []);
  assert.deepEqual(loaded.sources.perfMap, {
    file: 'target/perf-1.map',
    symbols: entries,
    skipped: 0,
    truncated: true,
  });
  assert.deepEqual(loaded.sources.jitDump, {
    file: 'target/jit-1.dump',
    symbols: records,
    readyToRun: records / 2,
    skipped: 0,
    truncated: false,
  });

  const jit = (address: number) => loaded.resolve({ pid: 1, ip: BigInt(address), dso: '[unknown]' });
  const at = (i: number, offset: number) => jit(jitRange(i).start + offset)?.name;
  assert.equal(at(0, 0), jitName(0), 'first');
  assert.equal(at(entries - 1, 0), jitName(entries - 1), 'last');
  assert.equal(at(entries - 2, jitRange(entries - 2).size - 1), jitName(entries - 2), 'last byte of the one before');
  const middle = entries / 2 + 1;
  assert.equal(at(middle, 4), jitName(middle), 'middle');
  // Entry 999 was logged over [0x20, 0x60) of entry 499; the jitdump repeats both, and its copy of 499 must not
  // hide 999 again.
  assert.equal(at(499, 0x30), jitName(999), 'the newer entry where they overlap');
  assert.equal(at(499, 0x10), jitName(499), 'the older one before');
  assert.equal(at(499, 0x70), jitName(499), 'and after');
  // Entry 999's own slot holds nothing: runtime memory no map names.
  assert.equal(jit(codeHeap + 999 * slot)?.name, unloggedStubName);
  // Past the last entry, where the cut last line would have put one.
  assert.equal(jit(codeHeap + entries * slot)?.name, unloggedStubName);

  const r2r = (k: number) => loaded.resolve({ pid: 1, ip: BigInt(r2rRange(k).start - dll.start + 8), dso: dll.path });
  for (const k of [0, records / 4, records / 2 - 1]) assert.deepEqual(r2r(k), { name: r2rName(k), kind: 'readytorun' });
}

test('a perf map of 150 000 entries and a jitdump of 200 000 records: every frame named right', async (t) => {
  await checkFolder(t, 150_000, 200_000);
});

test('a perf map of 1 000 000 entries and a jitdump of 1 000 000 records', async (t) => {
  await checkFolder(t, 1_000_000, 1_000_000);
});

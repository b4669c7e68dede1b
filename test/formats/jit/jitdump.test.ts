import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isProfcpuError } from '../../../src/error.js';
import { parseJitDump, readJitDump } from '../../../src/formats/jit/jitdump.js';

// Builds jitdump bytes the way perfjitdump.cpp lays them out (little-endian x86-64).
function header(pid = 4242): Buffer {
  const b = Buffer.alloc(40);
  b.writeUInt32LE(0x4a695444, 0);
  b.writeUInt32LE(1, 4);
  b.writeUInt32LE(40, 8);
  b.writeUInt32LE(62, 12);
  b.writeUInt32LE(pid, 20);
  b.writeBigUInt64LE(1000n, 24);
  return b;
}

function codeLoad(address: bigint, size: number, name: string, index: number, codeBytes = size): Buffer {
  const nameBytes = Buffer.from(name + '\0', 'utf8');
  const fixed = Buffer.alloc(56);
  fixed.writeUInt32LE(0, 0);
  fixed.writeUInt32LE(56 + nameBytes.length + codeBytes, 4);
  fixed.writeBigUInt64LE(2000n + BigInt(index), 8);
  fixed.writeUInt32LE(4242, 16);
  fixed.writeUInt32LE(4243, 20);
  fixed.writeBigUInt64LE(address, 24);
  fixed.writeBigUInt64LE(address, 32);
  fixed.writeBigUInt64LE(BigInt(size), 40);
  fixed.writeBigUInt64LE(BigInt(index), 48);
  return Buffer.concat([fixed, nameBytes, Buffer.alloc(codeBytes, 0xcc)]);
}

function otherRecord(id: number): Buffer {
  const b = Buffer.alloc(24);
  b.writeUInt32LE(id, 0);
  b.writeUInt32LE(24, 4);
  return b;
}

const r2r = 'instance void [System.Private.CoreLib] System.Threading.ExecutionContext::RunInternal()[PreJIT]';
const jit = 'int32 [App] App.Work::Sort(int32)[OptimizedTier1]';

test('reads the header and every JIT_CODE_LOAD record, skipping other kinds', () => {
  const data = Buffer.concat([
    header(),
    codeLoad(0x7f0000001000n, 0x40, r2r, 1),
    otherRecord(2),
    codeLoad(0x7f0000002000n, 0x1a0, jit, 2),
  ]);
  const result = parseJitDump(data);
  assert.deepEqual(result.header, { version: 1, elfMachine: 62, pid: 4242, timestamp: 1000n });
  assert.equal(result.otherRecords, 1);
  assert.equal(result.skipped, 0);
  assert.equal(result.truncated, false);
  assert.deepEqual(result.symbols, [
    { start: 0x7f0000001000n, size: 0x40n, name: r2r, timestamp: 2001n, codeIndex: 1n },
    { start: 0x7f0000002000n, size: 0x1a0n, name: jit, timestamp: 2002n, codeIndex: 2n },
  ]);
});

test('uses a record whose code bytes are missing: the runtime abandons the file mid-record', () => {
  // .NET 10 logs a 64 KiB stub block whose second half is unreadable: writev stops after 32 KiB and the runtime
  // closes the file there.
  const full = Buffer.concat([header(), codeLoad(0x1000n, 0x10, jit, 1), codeLoad(0x2000n, 0x10000, 'stub X<Y>', 2)]);
  const cut = full.subarray(0, full.length - 0x8000);
  const result = parseJitDump(cut);
  assert.equal(result.truncated, true);
  assert.deepEqual(
    result.symbols.map((s) => s.name),
    [jit, 'stub X<Y>'],
  );
});

test('a tail cut inside the fixed part or the name is dropped quietly, as still being written', () => {
  const full = Buffer.concat([header(), codeLoad(0x1000n, 0x10, jit, 1), codeLoad(0x2000n, 0x10, r2r, 2)]);
  const secondStart = 40 + codeLoad(0x1000n, 0x10, jit, 1).length;
  for (const cutAt of [secondStart + 3, secondStart + 20, secondStart + 60, secondStart + 56 + r2r.length]) {
    const result = parseJitDump(full.subarray(0, cutAt));
    assert.equal(result.truncated, true, `cut at ${cutAt}`);
    assert.equal(result.skipped, 0);
    assert.deepEqual(
      result.symbols.map((s) => s.name),
      [jit],
    );
  }
});

test('counts records it cannot read and stops at a size that cannot be right', () => {
  const noNul = codeLoad(0x3000n, 0x10, 'x', 3, 0);
  noNul[56 + 1] = 0x41; // overwrite the NUL: the name runs to the end of the record
  const zero = codeLoad(0x4000n, 0, 'zero', 4);
  const bogus = Buffer.alloc(16);
  bogus.writeUInt32LE(0, 0);
  bogus.writeUInt32LE(8, 4);
  const data = Buffer.concat([
    header(),
    noNul,
    zero,
    codeLoad(0x5000n, 0x10, jit, 5),
    bogus,
    codeLoad(0x6000n, 1, r2r, 6),
  ]);
  const result = parseJitDump(data);
  assert.equal(result.skipped, 3);
  assert.deepEqual(
    result.symbols.map((s) => s.start),
    [0x5000n],
  );
});

test('names in UTF-8', () => {
  const name = 'void [App] App.Größe::Überall()[QuickJitted]';
  assert.equal(parseJitDump(Buffer.concat([header(), codeLoad(0x10n, 1, name, 1)])).symbols[0]!.name, name);
});

test('a file that is no jitdump is a BAD_INPUT error with a remedy', () => {
  for (const data of [Buffer.alloc(10), Buffer.from('0x7f00 10 not a jitdump but a perf map, long enough to fail\n')]) {
    assert.throws(
      () => parseJitDump(data, 'jit-1.dump'),
      (e: unknown) => isProfcpuError(e, 'BAD_INPUT') && /jit-1\.dump/.test(e.message) && e.remedy !== undefined,
    );
  }
  const bigEndian = header();
  bigEndian.writeUInt32BE(0x4a695444, 0);
  assert.throws(() => parseJitDump(bigEndian), /big-endian/);
});

test('a header alone is an empty dump', () => {
  const result = parseJitDump(header());
  assert.equal(result.symbols.length, 0);
  assert.equal(result.truncated, false);
});

test('readJitDump (names kept as bytes) reads what parseJitDump reads, names that are not ASCII included', () => {
  const names = [jit, r2r, 'void [App] App.Größe::Überall()[QuickJitted]', '\ufeffbom first', 'a\ufeffb', ''];
  const invalid = codeLoad(0x9000n, 0x10, 'bad xx byte', 9);
  invalid[56 + 4] = 0xff;
  invalid[56 + 5] = 0xc3;
  const data = Buffer.concat([
    header(),
    ...names.map((name, i) => codeLoad(0x1000n * BigInt(i + 1), 0x10 + i, name, i)),
    otherRecord(2),
    invalid,
    codeLoad(0xa000n, 0, 'zero', 10),
  ]);
  const parsed = parseJitDump(data);
  const read = readJitDump(data);
  assert.deepEqual(
    read.symbols.toArray(),
    parsed.symbols.map(({ start, size, name }) => ({ start, size, name })),
  );
  assert.deepEqual({ ...read, symbols: undefined }, { ...parsed, symbols: undefined });
  assert.deepEqual(
    read.symbols.toArray().map((s) => s.name),
    [jit, r2r, names[2], 'bom first', 'a\ufeffb', '', 'bad \ufffd\ufffd byte'],
  );
  for (const cut of [data.length - 3, 40 + 60]) {
    const [a, b] = [readJitDump(data.subarray(0, cut)), parseJitDump(data.subarray(0, cut))];
    assert.equal(a.symbols.length, b.symbols.length);
    assert.deepEqual([a.truncated, a.skipped], [b.truncated, b.skipped]);
  }
});

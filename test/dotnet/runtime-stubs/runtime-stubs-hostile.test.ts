// The runtime-stubs reader against forged runtimes in a fake memory (test/support/fake-memory.ts): a well-formed
// one gives the ranges it holds; forged descriptors (magic, sizes, JSON huge, deep, broken or with prototype keys) are
// refused; forged range section maps (cycles, self-similar tables, pointers to unmapped memory, heaps claiming a
// terabyte, a heap dense with code blocks) end under the walk's bounds and the memory budget, each under a test
// deadline.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  descriptorLimits,
  parseDescriptorJson,
  readContractDescriptor,
  DescriptorError,
} from '../../../src/dotnet/runtime-stubs/contract-descriptor.js';
import { walkRuntimeStubs } from '../../../src/dotnet/runtime-stubs/runtime-stubs.js';
import { MemoryReadError } from '../../../src/target/process-memory.js';
import { FakeMemory } from '../../support/fake-memory.js';

const deadline = { timeout: 20_000 };

/** The layouts of .NET 10.0.12's descriptor that the walk reads. */
const types = {
  RangeSectionMap: { TopLevelData: 0 },
  RangeSectionFragment: { RangeBegin: 8, RangeEndOpen: 16, RangeSection: 24, Next: 0 },
  RangeSection: { RangeBegin: 0, RangeEndOpen: 8, NextForDelete: 64, JitManager: 24, Flags: 16, HeapList: 40 },
  CodeHeapListNode: { Next: 0, StartAddress: 16, EndAddress: 24, MapBase: 32, HeaderMap: 40 },
};

function descriptorJson(globals: Record<string, unknown> = {}): string {
  return JSON.stringify({
    version: 0,
    types,
    globals: { ExecutionManagerCodeRangeMapAddress: [[0], 'pointer'], StubCodeBlockLast: ['0xf', 'uint8'], ...globals },
    contracts: { ExecutionManager: 2 },
  });
}

const mapAddress = 0x5000_0000_0000n;
const region = 0x7f00_0000_0000n;

/** Index of `address` in the map's table of `level` (5 at the top, 1 at the bottom; 64-bit layout). */
const indexAt = (address: bigint, level: number) => Number((address >> BigInt(17 + 8 * (level - 1))) & 0xffn);

/**
 * A fake runtime whose map holds a range-list section of virtual dispatch stubs at region + 0x20000 and a code heap
 * at region + 0x40000 holding a dynamic helper (block at +0x18) and a method (block at +0x120).
 */
function fakeRuntime(memory = new FakeMemory()): FakeMemory {
  const tables = [0x5100_0000_0000n, 0x5200_0000_0000n, 0x5300_0000_0000n, 0x5400_0000_0000n];
  const stubs = region + 0x20000n;
  const heap = region + 0x40000n;
  const table = (slots: Record<number, bigint>) => Array.from({ length: 256 }, (_, i) => slots[i] ?? 0n);
  // Top table (level 5) inside the map, then levels 4 to 2, then level 1 pointing to fragments.
  memory.words(mapAddress, table({ [indexAt(stubs, 5)]: tables[0]! | 1n }));
  memory.words(tables[0]!, table({ [indexAt(stubs, 4)]: tables[1]! }));
  memory.words(tables[1]!, table({ [indexAt(stubs, 3)]: tables[2]! }));
  memory.words(tables[2]!, table({ [indexAt(stubs, 2)]: tables[3]! }));
  const fragment1 = 0x6000_0000_0000n;
  const fragment2 = 0x6000_0000_1000n;
  memory.words(tables[3]!, table({ [indexAt(stubs, 1)]: fragment1, [indexAt(heap, 1)]: fragment2 }));
  const section1 = 0x6100_0000_0000n;
  const section2 = 0x6100_0000_1000n;
  memory.words(fragment1, [0n, stubs, stubs + 0x10000n, section1]);
  memory.words(fragment2, [0n, heap, heap + 0x10000n, section2]);
  const rangeList = 0x6200_0000_0000n;
  memory.words(section1, [stubs, stubs + 0x10000n, 4n, 0n, 0n, 0n, rangeList, 0n, 0n]);
  const kind = Buffer.alloc(0x128);
  kind.writeUInt32LE(6, 0x120);
  memory.map(rangeList, kind);
  const heapNode = 0x6300_0000_0000n;
  const nibbleMap = 0x6400_0000_0000n;
  memory.words(section2, [heap, heap + 0x10000n, 2n, 0n, 0n, heapNode, 0n, 0n, 0n]);
  memory.words(heapNode, [0n, 0n, heap, heap + 0x200n, heap, nibbleMap]);
  const words = Buffer.alloc(8);
  words.writeUInt32LE(0x7000_0000, 0); // block at +0x18
  words.writeUInt32LE(0x0100_0000, 4); // block at +0x120
  memory.map(nibbleMap, words);
  const code = Buffer.alloc(0x200);
  code.writeBigUInt64LE(3n, 0x10); // before +0x18: a dynamic helper
  code.writeBigUInt64LE(0x5555_0000_1000n, 0x118); // before +0x120: a method's code header
  memory.map(heap, code);
  return memory;
}

const pointers = [mapAddress];

test('a well-formed fake runtime gives its stub ranges by kind', deadline, async () => {
  const memory = fakeRuntime();
  const walk = await walkRuntimeStubs(memory, parseDescriptorJson(descriptorJson(), pointers));
  assert.deepEqual(
    walk.ranges.map((r) => [r.start - region, r.end - region, r.kind]),
    [
      [0x20000n, 0x30000n, 'virtual dispatch'],
      [0x40018n, 0x40120n, 'dynamic helper'],
    ],
  );
  assert.deepEqual([walk.codeBlocks, walk.stubBlocks], [2, 1]);
  assert.deepEqual(walk.sections, { rangeLists: 1, codeHeaps: 1, other: 0 });
});

test(
  'the descriptor header: wrong magic, a huge JSON, a huge pointer count, 32-bit flags are refused',
  deadline,
  async () => {
    const at = 0x1000n;
    const header = (magic: string, flags: number, size: number, count: number) => {
      const b = Buffer.alloc(40);
      b.write(magic, 0, 'latin1');
      b.writeUInt32LE(flags, 8);
      b.writeUInt32LE(size, 12);
      b.writeBigUInt64LE(0x2000n, 16);
      b.writeUInt32LE(count, 24);
      b.writeBigUInt64LE(0x3000n, 32);
      return b;
    };
    const json = Buffer.from(descriptorJson());
    const cases: [Buffer, RegExp][] = [
      [header('DNCCDAX\0', 1, json.length, 1), /magic/],
      [header('DNCCDAC\0', 3, json.length, 1), /flags/],
      [header('DNCCDAC\0', 1, 0xffff_ffff, 1), /JSON text of 4294967295 bytes/],
      [header('DNCCDAC\0', 1, json.length, 0xffff_ffff), /4294967295 pointers/],
    ];
    for (const [bytes, message] of cases) {
      const memory = new FakeMemory().map(at, bytes).map(0x2000n, json).words(0x3000n, [mapAddress]);
      await assert.rejects(readContractDescriptor(memory, at), message);
      assert.ok(memory.bytesRead < 64 * 1024, `${memory.bytesRead} bytes read`);
    }
    // A JSON pointer into unmapped memory fails as a read.
    const memory = new FakeMemory().map(at, header('DNCCDAC\0', 1, json.length, 1));
    await assert.rejects(readContractDescriptor(memory, at), MemoryReadError);
  },
);

test('a JSON deep, broken, or keyed __proto__ is refused or names nothing', deadline, async () => {
  const deep = '['.repeat(descriptorLimits.maxJsonDepth + 1) + ']'.repeat(descriptorLimits.maxJsonDepth + 1);
  assert.throws(() => parseDescriptorJson(deep, []), DescriptorError);
  // Brackets inside strings do not count.
  assert.doesNotThrow(() => parseDescriptorJson(JSON.stringify({ types: { '[[[[[[[[[[[[[[[[[[[': {} } }), []));
  assert.throws(() => parseDescriptorJson('{"types": ', []), /does not parse/);
  assert.throws(() => parseDescriptorJson('[1]', []), /not an object/);
  const proto = parseDescriptorJson('{"types":{"__proto__":{"x":1}},"globals":{"__proto__":["0x10","uint8"]}}', []);
  assert.equal(proto.field('__proto__', 'x'), 1);
  assert.equal(proto.field('constructor', 'name'), undefined);
  assert.equal(proto.global('toString'), undefined);
  // Values of the wrong shape are undefined, not guessed.
  const odd = parseDescriptorJson(
    JSON.stringify({
      types: { T: { a: -1, b: 1.5, c: 'x', d: [2 ** 40, 'p'] } },
      globals: { g: [[99], 'pointer'], h: '0x1ffffffffffffffff', i: ['12', 'uint8'] },
    }),
    [1n],
  );
  assert.deepEqual(
    ['a', 'b', 'c', 'd'].map((f) => odd.field('T', f)),
    [undefined, undefined, undefined, undefined],
  );
  assert.deepEqual([odd.global('g'), odd.global('h'), odd.global('i')], [undefined, undefined, 12n]);
  // A descriptor without the layouts the walk needs is an error, not a walk with made-up offsets.
  await assert.rejects(
    walkRuntimeStubs(fakeRuntime(), parseDescriptorJson(JSON.stringify({ globals: {} }), pointers)),
    /no code range map/,
  );
  await assert.rejects(
    walkRuntimeStubs(
      fakeRuntime(),
      parseDescriptorJson(JSON.stringify({ globals: { ExecutionManagerCodeRangeMapAddress: [0] } }), pointers),
    ),
    /gives no RangeSectionMap.TopLevelData/,
  );
});

test('cycles in the map and in fragment lists end; pointers to unmapped memory are skipped', deadline, async () => {
  const memory = fakeRuntime();
  const fragment1 = 0x6000_0000_0000n;
  const fragment2 = 0x6000_0000_1000n;
  const section1 = 0x6100_0000_0000n;
  const section2 = 0x6100_0000_1000n;
  const stubs = region + 0x20000n;
  const heap = region + 0x40000n;
  // Mapped later, found first: the two fragments point to each other, and a level-4 entry points back to the top.
  const cyclic = new FakeMemory()
    .words(fragment1, [fragment2 | 1n, stubs, stubs + 0x10000n, section1])
    .words(fragment2, [fragment1, heap, heap + 0x10000n, section2]);
  const top = Array.from({ length: 256 }, (_, i) => (i === 7 ? mapAddress : i === 9 ? 0xdead_0000_0000n : 0n));
  cyclic.words(
    0x5100_0000_0000n,
    top.map((v, i) => (i === indexAt(stubs, 4) ? 0x5200_0000_0000n : v)),
  );
  const merged = cyclic;
  // Regions of the well-formed runtime not overridden above.
  for (const r of memory.regions) merged.map(r.start, r.bytes);
  const walk = await walkRuntimeStubs(merged, parseDescriptorJson(descriptorJson(), pointers));
  assert.deepEqual(
    walk.ranges.map((r) => r.kind),
    ['virtual dispatch', 'dynamic helper'],
  );
  assert.ok(
    walk.skipped.some((s) => s.includes('0xdead00000000')),
    walk.skipped.join('\n'),
  );
});

test(
  'a map whose every word points elsewhere into it ends under the bounds, each pointer followed once',
  deadline,
  async () => {
    // Every 8-byte step of the region is another "table" of 256 pointers scattered over it, another fragment, another
    // range section.
    const base = 0x5100_0000_0000n;
    const count = 32_768;
    const words = Array.from({ length: count + 256 }, (_, i) => base + BigInt(((i * 7919 + 13) % count) * 8));
    const fresh = () => new FakeMemory().words(base, words).words(mapAddress, Array(256).fill(base));
    const descriptor = parseDescriptorJson(descriptorJson(), pointers);
    const tight = fresh();
    await assert.rejects(
      walkRuntimeStubs(tight, descriptor, { maxFragments: 1000 }),
      (error: unknown) => error instanceof MemoryReadError && error.limit && /1000 fragments/.test(error.message),
    );
    assert.ok(tight.reads <= 1010, `${tight.reads} reads`);
    const loose = fresh();
    await assert.rejects(
      walkRuntimeStubs(loose, descriptor),
      (error: unknown) => error instanceof MemoryReadError && error.limit,
    );
    assert.ok(loose.reads <= 3 * count + 1, `${loose.reads} reads`);
  },
);

test('a code heap claiming a terabyte, or a map base outside its range, is skipped', deadline, async () => {
  const memory = fakeRuntime();
  const heap = region + 0x40000n;
  const section2 = 0x6100_0000_1000n;
  const heapNode = 0x6300_0000_0000n;
  const forged = new FakeMemory()
    .words(section2, [heap, heap + (1n << 40n), 2n, 0n, 0n, heapNode, 0n, 0n, 0n])
    .words(heapNode, [0n, 0n, heap, heap + (1n << 40n), heap, 0x6400_0000_0000n]);
  for (const r of memory.regions) forged.map(r.start, r.bytes);
  const walk = await walkRuntimeStubs(forged, parseDescriptorJson(descriptorJson(), pointers));
  assert.deepEqual(
    walk.ranges.map((r) => r.kind),
    ['virtual dispatch'],
  );
  assert.ok(
    walk.skipped.some((s) => /1099511627776 bytes/.test(s)),
    walk.skipped.join('\n'),
  );
  assert.ok(forged.bytesRead < 64 * 1024);
});

test('a code heap under the size cap but dense with block starts stops at the block cap', deadline, async () => {
  // A 1 GiB heap (the size cap) whose nibble map has a block start in every 32-byte bucket: 33 million starts in
  // 16 MiB of map. The walk handles each start as the map yields it, so it reads the map only as far as the block cap
  // and no further, and holds no list of starts.
  const heap = region + 0x40000n;
  const section2 = 0x6100_0000_1000n;
  const heapNode = 0x6300_0000_0000n;
  const nibbleMap = 0x6500_0000_0000n;
  const size = 1n << 30n;
  const mapBytes = Number(size / 256n) * 4;
  const dense = (limits: ConstructorParameters<typeof FakeMemory>[0], code: number) => {
    const forged = new FakeMemory(limits)
      .words(section2, [heap, heap + size, 2n, 0n, 0n, heapNode, 0n, 0n, 0n])
      .words(heapNode, [0n, 0n, heap, heap + size, heap, nibbleMap])
      .map(nibbleMap, Buffer.alloc(mapBytes, 0x11))
      // Header words of 0 (a stub of kind 0) for the first `code` bytes of the heap.
      .map(heap, Buffer.alloc(code));
    for (const r of fakeRuntime().regions) forged.map(r.start, r.bytes);
    return forged;
  };
  const descriptor = parseDescriptorJson(descriptorJson(), pointers);
  const maxCodeBlocks = 10_000;
  const capped = dense({}, 1 << 20);
  await assert.rejects(
    walkRuntimeStubs(capped, descriptor, { maxCodeBlocks }),
    (error: unknown) => error instanceof MemoryReadError && error.limit && /10000 code blocks/.test(error.message),
  );
  // One header read per block up to the cap, the map's first chunk, and the few reads of the map and sections.
  assert.ok(capped.reads <= maxCodeBlocks + 32, `${capped.reads} reads`);
  assert.ok(capped.bytesRead < mapBytes / 64, `${capped.bytesRead} bytes read of a ${mapBytes}-byte map`);
  // The review's case, the default limits and the heap's code unmapped past 0x200 bytes: the first unreadable header
  // ends that heap (skipped), after one chunk of the map.
  const unmapped = dense({}, 0x200);
  const walk = await walkRuntimeStubs(unmapped, descriptor);
  assert.ok(
    walk.skipped.some((s) => /not mapped/.test(s)),
    walk.skipped.join('\n'),
  );
  assert.ok(walk.codeBlocks <= 0x200 / 32 + 1, `${walk.codeBlocks} code blocks`);
  assert.ok(unmapped.bytesRead < mapBytes / 64, `${unmapped.bytesRead} bytes read`);
});

test('the memory budget, its deadline and an abort stop the walk', deadline, async () => {
  const descriptor = parseDescriptorJson(descriptorJson(), pointers);
  await assert.rejects(
    walkRuntimeStubs(fakeRuntime(new FakeMemory({ maxTotalBytes: 4096 })), descriptor),
    /bytes to read/,
  );
  await assert.rejects(walkRuntimeStubs(fakeRuntime(new FakeMemory({ maxReads: 3 })), descriptor), /3 reads made/);
  await assert.rejects(walkRuntimeStubs(fakeRuntime(new FakeMemory({ timeoutMs: -1 })), descriptor), /ms to read/);
  await assert.rejects(walkRuntimeStubs(fakeRuntime(new FakeMemory({}, AbortSignal.abort())), descriptor), /stopped/);
  await assert.rejects(new FakeMemory().read(0n, 2 << 20), /larger than/);
});

test('a read that never returns ends the walk at its deadline', deadline, async () => {
  // Memory the target backed with a file that never answers (a hung FUSE mount): the range list's read hangs.
  const memory = fakeRuntime();
  const read = memory.read.bind(memory);
  memory.read = (address, length) =>
    address === 0x6200_0000_0120n ? new Promise<Uint8Array>(() => {}) : read(address, length);
  const started = Date.now();
  await assert.rejects(
    walkRuntimeStubs(memory, parseDescriptorJson(descriptorJson(), pointers), {}, { timeoutMs: 300 }),
    /no answer within 300 ms/,
  );
  assert.ok(Date.now() - started < 10_000);
});

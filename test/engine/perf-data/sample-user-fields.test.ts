// A sample's fields after its callchain, crafted byte by byte as perf_event.h lays them out: RAW and BRANCH_STACK
// (with its hw_idx) skipped on the way to REGS_USER and STACK_USER, as perf's evsel__parse_sample reads them; and the
// samples perf refuses refused too (a dynamic stack size above the copy's, a record cut inside its stack).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { branchHwIndex, sampleBit, type EventAttr } from '../../../src/engine/perf-data/format.js';
import { decodeSample, RecordError } from '../../../src/engine/perf-data/records.js';

const sampleType =
  sampleBit.ip | sampleBit.tid | sampleBit.callchain | sampleBit.raw | sampleBit.branchStack | sampleBit.regsUser;
/** BP, SP and IP: perf's x86 registers 6, 7 and 8. */
const regsMask = 0b111000000n;

function attr(type: bigint): EventAttr {
  return {
    type: 1,
    config: 0n,
    sampleType: type,
    readFormat: 0n,
    sampleIdAll: false,
    inherit: false,
    contextSwitch: false,
    freq: false,
    samplePeriod: 0n,
    branchSampleType: branchHwIndex,
    sampleRegsUser: regsMask,
    sampleRegsIntr: 0n,
    ids: [],
    name: undefined,
  };
}

const u64 = (...values: bigint[]) => values.map((v) => Buffer.from(new BigUint64Array([v]).buffer));

/** A sample record: ip, tid, a 2-entry callchain, 12 bytes of raw data, 2 branches with hw_idx, registers, stack. */
function record(abi: bigint, stack: { size: number; dynamic: bigint } | undefined, cut = 0): Buffer {
  const raw = Buffer.alloc(16);
  raw.writeUInt32LE(12, 0);
  const parts = [
    ...u64(0x401000n, (7n << 32n) | 7n, 2n, 0x401000n, 0x402000n),
    raw,
    ...u64(2n, 99n, 1n, 2n, 3n, 4n, 5n, 6n),
    ...u64(abi, ...(abi === 0n ? [] : [0x7ff0n, 0x7f00n, 0x401000n])),
    ...(stack ? [...u64(BigInt(stack.size)), Buffer.alloc(stack.size, 0xab), ...u64(stack.dynamic)] : []),
  ];
  const body = Buffer.concat(parts);
  const header = Buffer.alloc(8);
  header.writeUInt32LE(9, 0);
  header.writeUInt16LE(8 + body.length - cut, 6);
  return Buffer.concat([header, body]).subarray(0, 8 + body.length - cut);
}

test('user registers and stack found past raw data and a branch stack with its hw_idx', () => {
  const withStack = attr(sampleType | sampleBit.stackUser);
  const sample = decodeSample(record(2n, { size: 16, dynamic: 8n }), 0, withStack);
  assert.deepEqual([...(sample.callchain ?? [])], [0x401000n, 0x402000n]);
  assert.equal(sample.userRegs?.abi, 2);
  assert.equal(sample.userRegs?.mask, regsMask);
  assert.deepEqual([...sample.userRegs!.values], [0x7ff0n, 0x7f00n, 0x401000n]);
  assert.deepEqual([...sample.userStack!], new Array(8).fill(0xab));
  // A process without user registers (abi 0): none read; an empty stack copy.
  const none = decodeSample(record(0n, { size: 0, dynamic: 0n }), 0, withStack);
  assert.deepEqual([...none.userRegs!.values], []);
  assert.equal(none.userStack?.length, 0);
  // Registers without a stack.
  assert.equal(decodeSample(record(2n, undefined), 0, attr(sampleType)).userStack, undefined);
});

test('a dynamic stack size above the copy, or a record cut inside it, is refused as perf refuses it', () => {
  const withStack = attr(sampleType | sampleBit.stackUser);
  assert.throws(() => decodeSample(record(2n, { size: 16, dynamic: 17n }), 0, withStack), RecordError);
  assert.throws(() => decodeSample(record(2n, { size: 16, dynamic: 8n }, 12), 0, withStack), RecordError);
  assert.throws(() => decodeSample(record(2n, undefined, 8), 0, attr(sampleType)), RecordError);
});

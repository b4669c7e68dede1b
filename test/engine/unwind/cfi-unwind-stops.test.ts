// The unwinder's stops on made-up stacks: every read bounded by the snapshot (perf's bound leaves its last word out),
// the CFA required to move up, perf's 127 frames at most, and each reason named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UserRegs } from '../../../src/engine/perf-data/records.js';
import { unwindUserStack, type UnwindRow } from '../../../src/engine/unwind/cfi-unwind.js';

const sp = 0x7000n;
/** Registers BP, SP and IP only (perf bits 6, 7, 8). */
const regs = (ip: bigint, bp = 0n): UserRegs => ({
  abi: 2,
  mask: 0b111000000n,
  values: new BigUint64Array([bp, sp, ip]),
});
const stack = (...words: bigint[]) => new Uint8Array(new BigUint64Array(words).buffer);
/** A leaf's row: the return address at the CFA - 8, CFA = rsp + 8. */
const leaf: UnwindRow = {
  cfa: { kind: 'register', register: 7, offset: 8n },
  registers: new Map([[16, { kind: 'offset', offset: -8n }]]),
};

test('return addresses minus 1 after the sampled ip, until one lies outside the snapshot', () => {
  // Three words: perf reads the first two only (addr + 8 < end).
  const result = unwindUserStack(regs(0x1000n), stack(0x2001n, 0x3001n, 0x4001n), { rowAt: () => leaf });
  assert.deepEqual(result, { frames: [0x1000n, 0x2000n, 0x3000n], stop: 'outside-stack' });
});

test('an undefined return address ends the stack, its frame given', () => {
  const end: UnwindRow = { ...leaf, registers: new Map([[16, { kind: 'undefined' }]]) };
  const result = unwindUserStack(regs(0x1000n), stack(0x2001n, 0n), { rowAt: (pc) => (pc < 0x2000n ? leaf : end) });
  assert.deepEqual(result, { frames: [0x1000n, 0x2000n], stop: 'end' });
});

test('no CFI, a zero return address, a CFA that does not move, a register not recorded', () => {
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => undefined }).stop, 'no-cfi');
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => leaf }).stop, 'zero-return-address');
  const still: UnwindRow = {
    cfa: { kind: 'register', register: 7, offset: 0n },
    registers: new Map([[16, { kind: 'same' }]]),
  };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => still }).stop, 'cfa-not-up');
  const viaRbx: UnwindRow = { ...leaf, cfa: { kind: 'register', register: 3, offset: 8n } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => viaRbx }).stop, 'no-register');
  const expression: UnwindRow = { ...leaf, cfa: { kind: 'expression', expression: new Uint8Array([0x77, 8]) } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => expression }).stop, 'expression');
});

test('a CFA far past the snapshot, or wrapping round 2^64, reads nothing', () => {
  const far: UnwindRow = { ...leaf, cfa: { kind: 'register', register: 7, offset: 0x7fffffffffffffffn } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(1n, 2n), { rowAt: () => far }).stop, 'outside-stack');
  const wrap: UnwindRow = { ...leaf, cfa: { kind: 'register', register: 6, offset: 16n } };
  const result = unwindUserStack(regs(0x1000n, 0xfffffffffffffff8n), stack(1n, 2n), { rowAt: () => wrap });
  assert.deepEqual(result, { frames: [0x1000n], stop: 'outside-stack' });
});

test('at most 127 frames, the first included', () => {
  // Each frame's return address at the CFA - 8, the CFA 8 bytes up: a stack of 200 return addresses.
  const words = Array.from({ length: 200 }, (_, i) => BigInt(0x1001 + i * 16));
  const result = unwindUserStack(regs(0x1000n), stack(...words), { rowAt: () => leaf });
  assert.equal(result.frames.length, 127);
  assert.equal(result.stop, 'max-frames');
  assert.equal(unwindUserStack(regs(0x1000n), stack(...words), { rowAt: () => leaf, maxFrames: 5 }).frames.length, 5);
});

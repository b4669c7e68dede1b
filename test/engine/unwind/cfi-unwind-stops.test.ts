// The unwinder's stops on made-up stacks: every read bounded by the snapshot (perf's bound leaves its last word out),
// the CFA required to move up, perf's 127 frames at most, and each reason named.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { UserRegs } from '../../../src/engine/perf-data/records.js';
import type { UnwindRow } from '../../../src/formats/elf/eh-frame.js';
import { unwindUserStack } from '../../../src/engine/unwind/cfi-unwind.js';

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
  start: 0,
  end: Number.MAX_SAFE_INTEGER,
  returnAddressRegister: 16,
  signalFrame: false,
  cfa: { type: 'register', register: 7, offset: 8 },
  registers: new Map([[16, { type: 'offset', offset: -8 }]]),
};

test('return addresses minus 1 after the sampled ip, until one lies outside the snapshot', () => {
  // Three words: perf reads the first two only (addr + 8 < end).
  const result = unwindUserStack(regs(0x1000n), stack(0x2001n, 0x3001n, 0x4001n), { rowAt: () => leaf });
  assert.deepEqual(result, { frames: [0x1000n, 0x2000n, 0x3000n], stop: 'outside-stack' });
});

test('an undefined return address ends the stack, its frame given', () => {
  const end: UnwindRow = { ...leaf, registers: new Map([[16, { type: 'undefined' }]]) };
  const result = unwindUserStack(regs(0x1000n), stack(0x2001n, 0n), { rowAt: (pc) => (pc < 0x2000n ? leaf : end) });
  assert.deepEqual(result, { frames: [0x1000n, 0x2000n], stop: 'end' });
});

test('no CFI, a zero return address, a CFA that does not move, a register not recorded', () => {
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => undefined }).stop, 'no-cfi');
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => leaf }).stop, 'zero-return-address');
  const still: UnwindRow = {
    ...leaf,
    cfa: { type: 'register', register: 7, offset: 0 },
    registers: new Map([[16, { type: 'same-value' }]]),
  };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => still }).stop, 'cfa-not-up');
  const viaRbx: UnwindRow = { ...leaf, cfa: { type: 'register', register: 3, offset: 8 } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => viaRbx }).stop, 'no-register');
  // DW_OP_call2, which the evaluator does not run; DW_OP_breg7 8 (rsp + 8, a leaf's CFA), which it does.
  const unknown: UnwindRow = { ...leaf, cfa: { type: 'expression', expression: new Uint8Array([0x98, 0, 0]) } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(0n, 0n), { rowAt: () => unknown }).stop, 'expression');
  const expression: UnwindRow = { ...leaf, cfa: { type: 'expression', expression: new Uint8Array([0x77, 8]) } };
  assert.deepEqual(unwindUserStack(regs(0x1000n), stack(0x2001n, 0n), { rowAt: () => expression }).frames, [
    0x1000n,
    0x2000n,
  ]);
});

test('a CFA far past the snapshot, or wrapping round 2^64, reads nothing', () => {
  const far: UnwindRow = { ...leaf, cfa: { type: 'register', register: 7, offset: Number.MAX_SAFE_INTEGER } };
  assert.equal(unwindUserStack(regs(0x1000n), stack(1n, 2n), { rowAt: () => far }).stop, 'outside-stack');
  const wrap: UnwindRow = { ...leaf, cfa: { type: 'register', register: 6, offset: 16 } };
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

test('code without CFI that keeps frame pointers (JIT code) is stepped by rbp, when the caller says which', () => {
  const end: UnwindRow = { ...leaf, registers: new Map([[16, { type: 'undefined' }]]) };
  const rowAt = (pc: bigint) => (pc < 0x2000n ? leaf : pc >= 0x3000n && pc < 0x4000n ? end : undefined);
  // The leaf returns into JIT code at 0x5000, whose frame (rbp 0x7010) was called from JIT code at 0x6000, whose
  // frame (rbp 0x7030) was called from native code with CFI at 0x3000, the outermost.
  const words = stack(0x5001n, 0n, 0x7030n, 0x6001n, 0n, 0n, 0n, 0x3001n, 0n);
  const framePointers = (pc: bigint) => pc >= 0x5000n && pc < 0x7000n;
  assert.deepEqual(unwindUserStack(regs(0x1000n, 0x7010n), words, { rowAt, framePointers }), {
    frames: [0x1000n, 0x5000n, 0x6000n, 0x3000n],
    stop: 'end',
  });
  assert.deepEqual(unwindUserStack(regs(0x1000n, 0x7010n), words, { rowAt }), {
    frames: [0x1000n, 0x5000n],
    stop: 'no-cfi',
  });
  // An rbp below the frame's sp is no frame base; one whose words lie past the snapshot ends there.
  assert.equal(unwindUserStack(regs(0x1000n, 0x6000n), words, { rowAt, framePointers }).stop, 'cfa-not-up');
  assert.equal(unwindUserStack(regs(0x1000n, 0x9000n), words, { rowAt, framePointers }).stop, 'outside-stack');
});

test('a 32-bit process’s registers are not read; an rbp naming its own slot ends the frame-pointer walk', () => {
  const i386: UserRegs = { ...regs(0x1000n), abi: 1 };
  assert.deepEqual(unwindUserStack(i386, stack(0x2001n, 0n), { rowAt: () => leaf }), {
    frames: [],
    stop: 'no-register',
  });
  // JIT code whose rbp (0x7008) holds 0x7008 and returns into itself: the second step's CFA does not rise.
  const framePointers = () => true;
  const self = stack(0n, 0x7008n, 0x5001n, 0n, 0n);
  const result = unwindUserStack(regs(0x5000n, 0x7008n), self, { rowAt: () => undefined, framePointers });
  assert.equal(result.stop, 'cfa-not-up');
  assert.ok(result.frames.length <= 3, String(result.frames.length));
});

test('at an epilogue’s ret, a register popped already keeps its value; a slot further down does not', () => {
  // The ret of a function that pushed rbp: CFA = rsp + 8, rbp saved at CFA - 16 (now just below sp: popped).
  const ret: UnwindRow = {
    ...leaf,
    registers: new Map([
      [16, { type: 'offset', offset: -8 }],
      [6, { type: 'offset', offset: -16 }],
    ]),
  };
  // The caller finds its CFA by rbp, which holds the caller's frame base again: 0x7010, its return address at 0x7018.
  const caller: UnwindRow = { ...leaf, cfa: { type: 'register', register: 6, offset: 16 } };
  const end: UnwindRow = { ...leaf, registers: new Map([[16, { type: 'undefined' }]]) };
  const rowAt = (pc: bigint) => (pc < 0x2000n ? ret : pc < 0x3000n ? caller : end);
  const words = stack(0x2001n, 0n, 0n, 0x3001n, 0n);
  assert.deepEqual(unwindUserStack(regs(0x1000n, 0x7010n), words, { rowAt }), {
    frames: [0x1000n, 0x2000n, 0x3000n],
    stop: 'end',
  });
  // Saved 256 bytes below the CFA: no epilogue pops that much, the register stays unknown.
  const deep: UnwindRow = { ...ret, registers: new Map([...ret.registers, [6, { type: 'offset', offset: -256 }]]) };
  const cut = unwindUserStack(regs(0x1000n, 0x7010n), words, { rowAt: (pc) => (pc < 0x2000n ? deep : caller) });
  assert.deepEqual(cut, { frames: [0x1000n, 0x2000n], stop: 'no-register' });
});

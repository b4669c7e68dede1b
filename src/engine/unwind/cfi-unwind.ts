// The user frames of a `perf record --call-graph dwarf` sample, unwound with CFI (.eh_frame) as perf's libunwind
// unwinding gives them: takes the sample's user registers, its stack snapshot (the bytes from the sampled sp upward)
// and the CFI row of any absolute address (`rowAt`: the caller maps the address to a file through the process's
// mappings and back), gives the frames' addresses and why the walk stopped. x86-64 only.
//
// The addresses are perf's (tools/perf/util/unwind-libunwind-local.c, get_entries): the sampled ip, then each
// caller's return address minus 1 (a signal frame's is kept as is), so that it falls inside the call instruction.
// The walk ends, as libunwind's unw_step does, where a frame's return address is undefined (glibc's _start and the
// thread side of clone3 say so: their frame is the last one given), where the CFA does not move, and at perf's
// max-stack (127 frames, the first included).
//
// The snapshot is the target's stack: whatever it holds is read within its bounds only, never trusted to be
// consistent. perf reads a word at `addr` from it only when `sp <= addr` and `addr + 8 < sp + size` (its bound leaves
// the last word out); so does this.
import { evaluateDwarfExpression } from '../../formats/elf/dwarf-expression.js';
import type { UnwindRow } from '../../formats/elf/eh-frame.js';
import { regsAbi } from '../perf-data/format.js';
import { type UserRegs, userRegister } from '../perf-data/records.js';

/** DWARF register numbers on x86-64 (System V psABI): 16 is the return address column. */
export const dwarfRegister = Object.freeze({
  rax: 0,
  rdx: 1,
  rcx: 2,
  rbx: 3,
  rsi: 4,
  rdi: 5,
  rbp: 6,
  rsp: 7,
  r8: 8,
  r15: 15,
  returnAddress: 16,
});

/** perf's x86 register numbers (arch/x86/include/uapi/asm/perf_regs.h), the bits of sample_regs_user. */
export const perfRegister = Object.freeze({ ax: 0, bx: 1, cx: 2, dx: 3, si: 4, di: 5, bp: 6, sp: 7, ip: 8, r8: 16 });

/** perf's register of each DWARF register 0-16 (16, the return address, is the ip). */
const perfOfDwarf = [0, 3, 2, 1, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23, 8];

/** What a DWARF expression may ask of the frame it is evaluated in. */
export interface ExpressionFrame {
  /** The current value of DWARF register `register`, undefined when unknown. */
  register(register: number): bigint | undefined;
  /** The u64 at `address` in the snapshot, undefined outside it. */
  read(address: bigint): bigint | undefined;
  /** The value pushed before a register rule's expression runs (the CFA); undefined for the CFA's own. */
  pushed: bigint | undefined;
}

export interface UnwindOptions {
  /** The CFI row of an absolute address, undefined when no CFI covers it. */
  rowAt(pc: bigint): UnwindRow | undefined;
  /**
   * Evaluates a DWARF expression (DW_CFA_def_cfa_expression, DW_CFA_[val_]expression; the PLT's CFA is one). Default
   * evaluateExpression: formats/elf/dwarf-expression.ts over the frame's registers and the snapshot.
   */
  evaluate?(expression: Uint8Array, frame: ExpressionFrame): bigint | undefined;
  /** Frames given at most, the first included. Default 127, perf's max-stack (kernel.perf_event_max_stack). */
  maxFrames?: number;
  /**
   * Whether the code at an address no CFI covers keeps frame pointers (.NET's JIT-compiled code and stubs do, and
   * have no CFI): such a frame is stepped by rbp (the caller's rbp at [rbp], its return address at [rbp + 8], its sp
   * rbp + 16), within the snapshot. None (the default): the walk stops at such code, as perf's does not quite (see
   * UnwindStop's no-cfi); with it, the frames differ from perf's there, which cannot name any past JIT code.
   */
  framePointers?(pc: bigint): boolean;
}

/** Why the walk stopped. */
export type UnwindStop =
  /** A frame's return address (or rbp) is undefined: the outermost frame, as _start and clone3 mark it. */
  | 'end'
  /** No CFI covers the pc (perf's libunwind then guesses from rbp, which this does not). */
  | 'no-cfi'
  /** The return address read is 0. */
  | 'zero-return-address'
  /** A value needed lies outside the snapshot. */
  | 'outside-stack'
  /** A register needed was not recorded, or a rule names one that does not exist. */
  | 'no-register'
  /** An expression could not be evaluated. */
  | 'expression'
  /** The CFA went down, or stayed with the same pc (libunwind's "ip and cfa unchanged"). */
  | 'cfa-not-up'
  | 'max-frames';

export interface Unwound {
  /** The frames' addresses as perf gives them: the sampled ip, then each return address minus 1. */
  frames: bigint[];
  stop: UnwindStop;
}

const maxStackDefault = 127;
const registers = 17;

/** The user frames of a sample with registers `regs` and stack snapshot `stack` (see the file's comment). */
export function unwindUserStack(regs: UserRegs, stack: Uint8Array, options: UnwindOptions): Unwound {
  const maxFrames = options.maxFrames ?? maxStackDefault;
  // Only a 64-bit process's registers (a 32-bit one's CFI and registers are i386's, which this does not read).
  let values: (bigint | undefined)[] = perfOfDwarf.map((perf) =>
    regs.abi === regsAbi.abi64 ? userRegister(regs, perf) : undefined,
  );
  const ip = values[dwarfRegister.returnAddress];
  const sp = values[dwarfRegister.rsp];
  if (ip === undefined) return { frames: [], stop: 'no-register' };
  const frames = [ip];
  if (sp === undefined) return { frames, stop: 'no-register' };
  const view = new DataView(stack.buffer, stack.byteOffset, stack.byteLength);
  const end = sp + BigInt(stack.byteLength);
  const read = (address: bigint): bigint | undefined =>
    address >= sp && address + 8n < end ? view.getBigUint64(Number(address - sp), true) : undefined;

  let pc = ip;
  let cfa = sp;
  let lookup = ip;
  // The caller's row, found when its frame was pushed: looked up once (a hostile file's rows cost up to ~2 ms each).
  let next: UnwindRow | undefined | null = null;
  for (;;) {
    if (frames.length >= maxFrames) return { frames, stop: 'max-frames' };
    const row = next === null ? options.rowAt(lookup) : next;
    if (!row && !options.framePointers?.(lookup)) return { frames, stop: 'no-cfi' };
    const step = row
      ? stepFrame(row, values, read, options.evaluate ?? evaluateExpression)
      : framePointerStep(values, read, cfa);
    if (typeof step === 'string') return { frames, stop: step };
    if (step.cfa < cfa || (step.cfa === cfa && step.pc === pc)) return { frames, stop: 'cfa-not-up' };
    if (step.pc === 0n) return { frames, stop: 'zero-return-address' };
    [values, cfa, pc] = [step.values, step.cfa, step.pc];
    // The caller's row is looked up inside its call instruction, as libunwind's use_prev_instr, unless the return
    // address is a signal trampoline's first instruction.
    const caller = options.rowAt(pc - 1n);
    const signal = caller?.signalFrame === true;
    lookup = signal ? pc : pc - 1n;
    next = signal ? null : caller;
    frames.push(signal ? pc : pc - 1n);
  }
}

/** A DWARF expression over the frame's registers and 8-byte reads of the snapshot, the value pushed first if any. */
export function evaluateExpression(expression: Uint8Array, frame: ExpressionFrame): bigint | undefined {
  return evaluateDwarfExpression(
    expression,
    {
      register: (n) => frame.register(n),
      readMemory: (address, size) => (size === 8 ? frame.read(address) : undefined),
    },
    frame.pushed,
  );
}

/**
 * One step by frame pointer from a frame whose rbp is its frame's base: the caller's rbp and return address above
 * it. The other registers the caller saved are unknown after it (the frame keeps them where its code says).
 */
function framePointerStep(
  values: readonly (bigint | undefined)[],
  read: (address: bigint) => bigint | undefined,
  sp: bigint,
): Step {
  const rbp = values[dwarfRegister.rbp];
  if (rbp === undefined) return 'no-register';
  if (rbp < sp) return 'cfa-not-up';
  const callerRbp = read(rbp);
  const pc = read(BigInt.asUintN(64, rbp + 8n));
  if (callerRbp === undefined || pc === undefined) return 'outside-stack';
  const next: (bigint | undefined)[] = new Array<bigint | undefined>(registers).fill(undefined);
  next[dwarfRegister.rbp] = callerRbp;
  next[dwarfRegister.rsp] = BigInt.asUintN(64, rbp + 16n);
  next[dwarfRegister.returnAddress] = pc;
  return { values: next, cfa: BigInt.asUintN(64, rbp + 16n), pc };
}

type Step = { values: (bigint | undefined)[]; cfa: bigint; pc: bigint } | UnwindStop;

/** How far below the stack pointer an epilogue's popped slots lie at most: the registers it pops, 8 bytes each. */
const poppedBytes = 128n;

/** Whether `slot` lies just below the frame's stack pointer, its CFA above it (see stepFrame's `offset` rule). */
function popped(slot: bigint, cfa: bigint, values: readonly (bigint | undefined)[]): boolean {
  const sp = values[dwarfRegister.rsp];
  return sp !== undefined && cfa > sp && slot < sp && sp - slot <= poppedBytes;
}

/** One step from the frame whose registers are `values` to its caller's, by `row` (libunwind's apply_reg_state). */
function stepFrame(
  row: UnwindRow,
  values: readonly (bigint | undefined)[],
  read: (address: bigint) => bigint | undefined,
  evaluate: NonNullable<UnwindOptions['evaluate']>,
): Step {
  const frame = (pushed: bigint | undefined): ExpressionFrame => ({
    register: (n) => values[n],
    read,
    pushed,
  });
  let cfa: bigint | undefined;
  if (row.cfa.type === 'register') {
    const base = values[row.cfa.register];
    if (base === undefined) return 'no-register';
    cfa = BigInt.asUintN(64, base + BigInt(row.cfa.offset));
  } else {
    cfa = evaluate(row.cfa.expression, frame(undefined));
    if (cfa === undefined) return 'expression';
  }
  const next: (bigint | undefined)[] = values.slice();
  // The caller's sp is the CFA, whatever the rules say (libunwind reads rsp as the cursor's CFA).
  next[dwarfRegister.rsp] = cfa;
  const unreadable = new Set<number>();
  let endOfStack = false;
  for (const [register, rule] of row.registers) {
    if (register < 0 || register >= registers || register === dwarfRegister.rsp) continue;
    let value: bigint | undefined;
    switch (rule.type) {
      case 'undefined':
        // libunwind ends the walk where the return address or rbp is undefined.
        if (register === dwarfRegister.rbp) endOfStack = true;
        value = undefined;
        break;
      case 'same-value':
        value = values[register];
        break;
      case 'offset': {
        const slot = BigInt.asUintN(64, cfa + BigInt(rule.offset));
        value = read(slot);
        // A slot just below the stack pointer of a frame whose CFA is above it was popped already (an epilogue's
        // rows keep the rule after the pop, up to its ret): the register holds the caller's value again. libunwind
        // reads the dead slot there, which perf's snapshot does not hold, and loses the register. (A leaf that saves a
        // register into the red zone with a mov looks the same: rare, and then the walk takes the live value.)
        if (value === undefined && register !== row.returnAddressRegister && popped(slot, cfa, values))
          value = values[register];
        if (value === undefined) unreadable.add(register);
        break;
      }
      case 'val-offset':
        value = BigInt.asUintN(64, cfa + BigInt(rule.offset));
        break;
      case 'register':
        if (rule.register < 0 || rule.register >= registers) return 'no-register';
        value = values[rule.register];
        break;
      case 'expression':
      case 'val-expression': {
        const result = evaluate(rule.expression, frame(cfa));
        if (result === undefined) return 'expression';
        value = rule.type === 'val-expression' ? result : read(result);
        if (value === undefined) unreadable.add(register);
        break;
      }
    }
    next[register] = value;
  }
  const column = row.returnAddressRegister;
  if (column < 0 || column >= registers) return 'no-register';
  const returnRule = row.registers.get(column);
  if (returnRule?.type === 'undefined') return 'end';
  if (unreadable.has(column)) return 'outside-stack';
  const pc = next[column];
  if (pc === undefined) return 'no-register';
  if (endOfStack) return 'end';
  // Registers read from memory that failed stay unknown: libunwind fails only when one of them is used.
  next[dwarfRegister.returnAddress] = pc;
  return { values: next, cfa, pc };
}

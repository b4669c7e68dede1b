// The call frame instructions of a CIE and an FDE (DWARF 5 §6.4.2) in, the unwind row in effect at one address out:
// the rule that gives the CFA, and the rule of each register the row names. Runs only the instructions before the
// address; the program is the target's, so it runs under an instruction cap and a remember_state depth cap, and an
// unknown instruction or a register number past the cap throws CfiDataError (eh-frame.ts makes it "no row").
import { CfiDataError, type DwarfCursor } from './dwarf-cursor.js';

export const cfaProgramLimits = Object.freeze({
  /**
   * Instructions run for one row, the CIE's and the FDE's together, a remember or restore counting one per rule it
   * copies (the largest real FDEs hold a few hundred): about 2 ms of work at most, so one sample's 127 frames cannot
   * cost more than a fraction of a second whatever a target's file holds.
   */
  maxInstructions: 20_000,
  /** DW_CFA_remember_state nested at most (compilers nest one or two). */
  maxStateDepth: 64,
  /** Highest DWARF register number a rule may name (x86-64's go to 130: the AVX-512 mask registers). */
  maxRegister: 255,
});

/** How the CFA (the caller's stack pointer before the call) is computed. */
export type CfaRule =
  | { readonly type: 'register'; readonly register: number; readonly offset: number }
  /** A DWARF expression (dwarf-expression.ts), run with an empty stack: the CFA is its value. */
  | { readonly type: 'expression'; readonly expression: Uint8Array };

/** How the caller's value of one register is found (DWARF 5 §6.4.1). */
export type RegisterRule =
  | { readonly type: 'undefined' }
  | { readonly type: 'same-value' }
  /** Saved in memory at CFA + offset. */
  | { readonly type: 'offset'; readonly offset: number }
  /** The value is CFA + offset. */
  | { readonly type: 'val-offset'; readonly offset: number }
  /** Held in another register. */
  | { readonly type: 'register'; readonly register: number }
  /** Saved in memory at the address the expression gives, run with the CFA pushed. */
  | { readonly type: 'expression'; readonly expression: Uint8Array }
  /** The value is what the expression gives, run with the CFA pushed. */
  | { readonly type: 'val-expression'; readonly expression: Uint8Array };

/** One row of the table DWARF describes: what holds from `start` up to `end`. */
export interface UnwindRow {
  /** The first address the row holds at, and the first past it (the next row's, or the FDE's end). */
  start: number;
  end: number;
  cfa: CfaRule;
  /** The rules the row names, by DWARF register number; a register not named has no rule given. */
  registers: ReadonlyMap<number, RegisterRule>;
  /** The column of the return address (the CIE's; 16 on x86-64). */
  returnAddressRegister: number;
  /** The CIE's augmentation has `S`: the frame is a signal handler's, its return address is not after a call. */
  signalFrame: boolean;
}

/** What a CIE tells the program. */
export interface ProgramContext {
  codeAlignment: number;
  dataAlignment: number;
  /** Reads a DW_CFA_set_loc operand (in the FDE's pointer encoding). */
  address(cursor: DwarfCursor): number;
  /** The row after the CIE's initial instructions, for DW_CFA_restore; undefined while running those. */
  initial: RowState | undefined;
}

/** A row being built. */
export interface RowState {
  cfa: CfaRule;
  registers: Map<number, RegisterRule>;
}

const undefinedRule: RegisterRule = Object.freeze({ type: 'undefined' });
const sameValueRule: RegisterRule = Object.freeze({ type: 'same-value' });

/**
 * Runs the instructions in `cursor` on `state` from location `loc`, stopping before the first advance past `pc`.
 * Gives the location the last row took effect at and the one the next would (Infinity when the program ended).
 * `budget.left` counts down the instructions still allowed.
 */
export function runProgram(
  cursor: DwarfCursor,
  context: ProgramContext,
  state: RowState,
  loc: number,
  pc: number,
  budget: { left: number },
): { start: number; next: number } {
  const { maxStateDepth } = cfaProgramLimits;
  const { codeAlignment, dataAlignment } = context;
  const stack: RowState[] = [];
  const regs = state.registers;
  // The last register+offset CFA, for a DW_CFA_def_cfa_register or _offset after an expression (as readelf keeps).
  let cfaRegister = state.cfa.type === 'register' ? state.cfa.register : 7;
  let cfaOffset = state.cfa.type === 'register' ? state.cfa.offset : 0;
  const setCfa = (register: number, offset: number) => {
    cfaRegister = register;
    cfaOffset = offset;
    state.cfa = { type: 'register', register, offset };
  };
  const advance = (to: number): boolean => {
    if (!Number.isSafeInteger(to) || to < loc) throw new CfiDataError(`location moves back to ${to}`);
    if (to > pc) return false;
    loc = to;
    return true;
  };
  const restore = (register: number) => {
    const rule = context.initial?.registers.get(register);
    if (rule) regs.set(register, rule);
    else regs.delete(register);
  };
  while (cursor.left > 0) {
    if (--budget.left < 0) throw new CfiDataError('instruction cap reached');
    const start = cursor.at;
    const op = cursor.u8();
    const low = op & 0x3f;
    let to: number | undefined;
    switch (op >> 6) {
      case 1: // DW_CFA_advance_loc
        to = loc + low * codeAlignment;
        break;
      case 2: // DW_CFA_offset
        regs.set(reg(low), { type: 'offset', offset: cursor.uleb() * dataAlignment });
        break;
      case 3: // DW_CFA_restore
        restore(low);
        break;
      default:
        switch (op) {
          case 0x00: // nop
            break;
          case 0x2e: // GNU_args_size: what the callee pops, nothing to unwind
            cursor.uleb();
            break;
          case 0x01: // set_loc
            to = context.address(cursor);
            break;
          case 0x02:
            to = loc + cursor.u8() * codeAlignment;
            break;
          case 0x03:
            to = loc + cursor.u16() * codeAlignment;
            break;
          case 0x04:
            to = loc + cursor.u32() * codeAlignment;
            break;
          case 0x05: // offset_extended
            regs.set(reg(cursor.uleb()), { type: 'offset', offset: cursor.uleb() * dataAlignment });
            break;
          case 0x06: // restore_extended
            restore(reg(cursor.uleb()));
            break;
          case 0x07:
            regs.set(reg(cursor.uleb()), undefinedRule);
            break;
          case 0x08:
            regs.set(reg(cursor.uleb()), sameValueRule);
            break;
          case 0x09: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'register', register: reg(cursor.uleb()) });
            break;
          }
          case 0x0a: // remember_state
            if (stack.length >= maxStateDepth) throw new CfiDataError(`remember_state deeper than ${maxStateDepth}`);
            // A copy of every rule: charged as that many instructions, so that remember/restore pairs over a full
            // register set cannot make one row cost a hundred thousand map copies.
            budget.left -= regs.size;
            stack.push({ cfa: state.cfa, registers: new Map(regs) });
            break;
          case 0x0b: {
            // restore_state: the CFA rule too, as libgcc and readelf do
            const saved = stack.pop();
            if (!saved) throw new CfiDataError('restore_state without remember_state');
            budget.left -= saved.registers.size;
            regs.clear();
            for (const [r, rule] of saved.registers) regs.set(r, rule);
            if (saved.cfa.type === 'register') setCfa(saved.cfa.register, saved.cfa.offset);
            else state.cfa = saved.cfa;
            break;
          }
          case 0x0c: {
            const register = reg(cursor.uleb());
            setCfa(register, cursor.uleb());
            break;
          }
          case 0x0d:
            setCfa(reg(cursor.uleb()), cfaOffset);
            break;
          case 0x0e:
            setCfa(cfaRegister, cursor.uleb());
            break;
          case 0x0f:
            state.cfa = { type: 'expression', expression: block(cursor) };
            break;
          case 0x10: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'expression', expression: block(cursor) });
            break;
          }
          case 0x11: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'offset', offset: cursor.sleb() * dataAlignment });
            break;
          }
          case 0x12: {
            const register = reg(cursor.uleb());
            setCfa(register, cursor.sleb() * dataAlignment);
            break;
          }
          case 0x13:
            setCfa(cfaRegister, cursor.sleb() * dataAlignment);
            break;
          case 0x14: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'val-offset', offset: cursor.uleb() * dataAlignment });
            break;
          }
          case 0x15: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'val-offset', offset: cursor.sleb() * dataAlignment });
            break;
          }
          case 0x16: {
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'val-expression', expression: block(cursor) });
            break;
          }
          case 0x2f: {
            // GNU_negative_offset_extended (old GCC)
            const register = reg(cursor.uleb());
            regs.set(register, { type: 'offset', offset: -cursor.uleb() * dataAlignment });
            break;
          }
          default:
            // An instruction of unknown length: nothing after it can be read.
            throw new CfiDataError(`unknown call frame instruction 0x${op.toString(16)} at ${start}`);
        }
    }
    if (to !== undefined && !advance(to)) return { start: loc, next: to };
  }
  return { start: loc, next: Infinity };
}

function reg(n: number): number {
  if (n > cfaProgramLimits.maxRegister) throw new CfiDataError(`register ${n}`);
  return n;
}

/** A uleb128 length and that many bytes: a view of the section, not a copy. */
function block(cursor: DwarfCursor): Uint8Array {
  const length = cursor.uleb();
  const at = cursor.at;
  cursor.skip(length);
  return cursor.bytes.subarray(at, at + length);
}

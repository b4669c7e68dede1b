// A DWARF expression's bytes (from a CFA or register rule of eh-frame.ts) and the values it may read (registers by
// DWARF number, memory through a callback) in; the 64-bit value it computes out, or undefined. Enough of DWARF 5
// §2.5 for call frame information: constants, register-relative values (DW_OP_breg*, DW_OP_bregx), stack operations,
// arithmetic, logic and comparisons, branches, DW_OP_deref(_size). The expression is the target's: it runs under a
// step cap and a stack cap, and anything else (an unknown or location operation, a register or memory read the
// caller cannot answer, a division by zero, a truncated operand) gives undefined, never a throw or a hang.
import { CfiDataError, DwarfCursor } from './dwarf-cursor.js';

export const dwarfExpressionLimits = Object.freeze({
  /** Operations run at most (a branch back makes a loop; the PLT's expression takes 9). */
  maxSteps: 1000,
  /** Values on the stack at most. */
  maxStack: 64,
});

/** What an expression may read. */
export interface ExpressionInputs {
  /** The value of DWARF register `number` in the frame being unwound, undefined when unknown. */
  register(number: number): bigint | undefined;
  /** `size` bytes (1 to 8) of memory at `address`, little-endian, undefined when unreadable. Omitted: no memory. */
  readMemory?(address: bigint, size: number): bigint | undefined;
}

/**
 * The value of `expression`, run with `initial` on the stack (the CFA, for a DW_CFA_expression or val_expression
 * register rule; nothing for DW_CFA_def_cfa_expression), as an unsigned 64-bit value; undefined when it cannot run.
 */
export function evaluateDwarfExpression(
  expression: Uint8Array,
  inputs: ExpressionInputs,
  initial?: bigint,
): bigint | undefined {
  try {
    return run(expression, inputs, initial);
  } catch (error) {
    if (error instanceof CfiDataError || error instanceof Unsupported) return undefined;
    throw error;
  }
}

class Unsupported extends Error {}

const u64 = (v: bigint) => BigInt.asUintN(64, v);
const s64 = (v: bigint) => BigInt.asIntN(64, v);

function run(expression: Uint8Array, inputs: ExpressionInputs, initial: bigint | undefined): bigint | undefined {
  const { maxSteps, maxStack } = dwarfExpressionLimits;
  const cursor = new DwarfCursor(expression, 0, 0, expression.length);
  const stack: bigint[] = initial === undefined ? [] : [u64(initial)];
  const push = (v: bigint) => {
    if (stack.length >= maxStack) throw new Unsupported('stack full');
    stack.push(u64(v));
  };
  const pop = (): bigint => {
    const v = stack.pop();
    if (v === undefined) throw new Unsupported('stack empty');
    return v;
  };
  const register = (n: number, offset: bigint) => {
    const value = inputs.register(n);
    if (value === undefined) throw new Unsupported(`register ${n} unknown`);
    push(value + offset);
  };
  const memory = (size: number) => {
    if (size < 1 || size > 8) throw new Unsupported(`deref of ${size} bytes`);
    const value = inputs.readMemory?.(pop(), size);
    if (value === undefined) throw new Unsupported('memory unreadable');
    push(BigInt.asUintN(size * 8, value));
  };
  const binary = (f: (a: bigint, b: bigint) => bigint) => {
    const b = pop();
    const a = pop();
    push(f(a, b));
  };
  const compare = (f: (a: bigint, b: bigint) => boolean) => binary((a, b) => (f(s64(a), s64(b)) ? 1n : 0n));
  for (let step = 0; cursor.left > 0; step++) {
    if (step >= maxSteps) return undefined;
    const op = cursor.u8();
    if (op >= 0x30 && op <= 0x4f)
      push(BigInt(op - 0x30)); // DW_OP_lit0..31
    else if (op >= 0x70 && op <= 0x8f)
      register(op - 0x70, cursor.slebn()); // DW_OP_breg0..31
    else
      switch (op) {
        case 0x03: // addr
        case 0x0e: // const8u
          push(cursor.u64n());
          break;
        case 0x06: // deref
          memory(8);
          break;
        case 0x08: // const1u
          push(BigInt(cursor.u8()));
          break;
        case 0x09: // const1s
          push(BigInt(cursor.s8()));
          break;
        case 0x0a: // const2u
          push(BigInt(cursor.u16()));
          break;
        case 0x0b: // const2s
          push(BigInt(cursor.s16()));
          break;
        case 0x0c: // const4u
          push(BigInt(cursor.u32()));
          break;
        case 0x0d: // const4s
          push(BigInt(cursor.s32()));
          break;
        case 0x0f: // const8s
          push(cursor.s64n());
          break;
        case 0x10: // constu
          push(cursor.ulebn());
          break;
        case 0x11: // consts
          push(cursor.slebn());
          break;
        case 0x12: // dup
          push(peek(stack, 0));
          break;
        case 0x13: // drop
          pop();
          break;
        case 0x14: // over
          push(peek(stack, 1));
          break;
        case 0x15: // pick
          push(peek(stack, cursor.u8()));
          break;
        case 0x16: {
          // swap
          const b = pop();
          const a = pop();
          push(b);
          push(a);
          break;
        }
        case 0x17: {
          // rot: the top moves down two
          const c = pop();
          const b = pop();
          const a = pop();
          push(c);
          push(a);
          push(b);
          break;
        }
        case 0x19: // abs
          push(((v) => (v < 0n ? -v : v))(s64(pop())));
          break;
        case 0x1a: // and
          binary((a, b) => a & b);
          break;
        case 0x1b: // div (signed)
          binary((a, b) => {
            if (b === 0n) throw new Unsupported('division by zero');
            return s64(a) / s64(b);
          });
          break;
        case 0x1c: // minus
          binary((a, b) => a - b);
          break;
        case 0x1d: // mod
          binary((a, b) => {
            if (b === 0n) throw new Unsupported('division by zero');
            return a % b;
          });
          break;
        case 0x1e: // mul
          binary((a, b) => a * b);
          break;
        case 0x1f: // neg
          push(-s64(pop()));
          break;
        case 0x20: // not
          push(~pop());
          break;
        case 0x21: // or
          binary((a, b) => a | b);
          break;
        case 0x22: // plus
          binary((a, b) => a + b);
          break;
        case 0x23: // plus_uconst
          push(pop() + cursor.ulebn());
          break;
        case 0x24: // shl
          binary((a, b) => (b >= 64n ? 0n : a << b));
          break;
        case 0x25: // shr
          binary((a, b) => (b >= 64n ? 0n : a >> b));
          break;
        case 0x26: // shra
          binary((a, b) => s64(a) >> (b >= 64n ? 63n : b));
          break;
        case 0x27: // xor
          binary((a, b) => a ^ b);
          break;
        case 0x28: {
          // bra
          const offset = cursor.s16();
          if (pop() !== 0n) jump(cursor, offset);
          break;
        }
        case 0x29:
          compare((a, b) => a === b);
          break;
        case 0x2a:
          compare((a, b) => a >= b);
          break;
        case 0x2b:
          compare((a, b) => a > b);
          break;
        case 0x2c:
          compare((a, b) => a <= b);
          break;
        case 0x2d:
          compare((a, b) => a < b);
          break;
        case 0x2e:
          compare((a, b) => a !== b);
          break;
        case 0x2f: // skip
          jump(cursor, cursor.s16());
          break;
        case 0x92: {
          // bregx
          const n = cursor.uleb();
          register(n, cursor.slebn());
          break;
        }
        case 0x94: // deref_size
          memory(cursor.u8());
          break;
        case 0x96: // nop
          break;
        default:
          // DW_OP_reg* and regx name a location, not a value; fbreg, call*, TLS, entry values and the typed
          // operations need more than a CFA rule can give.
          return undefined;
      }
  }
  return stack.length > 0 ? stack[stack.length - 1] : undefined;
}

function peek(stack: bigint[], depth: number): bigint {
  const v = stack[stack.length - 1 - depth];
  if (v === undefined) throw new Unsupported('stack too shallow');
  return v;
}

function jump(cursor: DwarfCursor, offset: number): void {
  const to = cursor.at + offset;
  if (to < 0 || to > cursor.end) throw new Unsupported('branch outside the expression');
  cursor.at = to;
}

// The CFI of an ELF file as `readelf --debug-dump=frames-interp` prints it, for the unwinder's tests: an oracle apart
// from the .eh_frame reader profcpu has. Each FDE's table (or, for an FDE without one, its CIE's) becomes UnwindRows
// by file address. readelf prints "u" both for DW_CFA_undefined and for a register not saved yet; only the return
// address is ever undefined on purpose (glibc's _start and clone3), so "u" is undefined there and "same value"
// elsewhere. An expression ("exp") is kept without its bytes (frames-interp does not print them).
import { execFileSync, spawnSync } from 'node:child_process';
import type { RegisterRule, UnwindRow } from '../../../src/engine/unwind/cfi-unwind.js';

const names = [
  'rax',
  'rdx',
  'rcx',
  'rbx',
  'rsi',
  'rdi',
  'rbp',
  'rsp',
  'r8',
  'r9',
  'r10',
  'r11',
  'r12',
  'r13',
  'r14',
  'r15',
  'ra',
];

interface Fde {
  start: bigint;
  end: bigint;
  rows: { at: bigint; row: UnwindRow }[];
}

export class ReadelfCfi {
  private constructor(
    private readonly fdes: Fde[],
    /** [file offset, vaddr, size] of each executable segment. */
    private readonly segments: [bigint, bigint, bigint][],
  ) {}

  static of(file: string): ReadelfCfi {
    // readelf 2.40 exits with 1 on libc.so.6 having printed it all: what it prints is what counts.
    const { stdout: text } = spawnSync('readelf', ['--debug-dump=frames-interp', file], {
      encoding: 'utf8',
      maxBuffer: 1 << 28,
    });
    if (!text.includes('.eh_frame')) throw new Error(`readelf printed no .eh_frame for ${file}`);
    const fdes: Fde[] = [];
    const cies = new Map<string, { row: UnwindRow | undefined; signal: boolean }>();
    let columns: string[] = [];
    let target: { rows: { at: bigint; row: UnwindRow }[]; signal: boolean } | undefined;
    let cie: { id: string; signal: boolean; rows: { at: bigint; row: UnwindRow }[] } | undefined;
    const finishCie = () => {
      if (cie) cies.set(cie.id, { row: cie.rows[0]?.row, signal: cie.signal });
      cie = undefined;
    };
    for (const line of text.split('\n')) {
      const cieLine = /^([0-9a-f]+) [0-9a-f]+ [0-9a-f]+ CIE "([^"]*)"/.exec(line);
      const fdeLine = /^[0-9a-f]+ [0-9a-f]+ [0-9a-f]+ FDE cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)/.exec(line);
      if (cieLine) {
        finishCie();
        cie = { id: cieLine[1]!, signal: cieLine[2]!.includes('S'), rows: [] };
        target = cie;
      } else if (fdeLine) {
        finishCie();
        const owner = cies.get(fdeLine[1]!);
        const fde: Fde = { start: BigInt(`0x${fdeLine[2]}`), end: BigInt(`0x${fdeLine[3]}`), rows: [] };
        const signal = owner?.signal ?? false;
        if (owner?.row) fde.rows.push({ at: fde.start, row: { ...owner.row, signalFrame: signal } });
        fdes.push(fde);
        target = { rows: fde.rows, signal };
      } else if (/^ +LOC +CFA/.test(line)) {
        columns = line.trim().split(/\s+/).slice(2);
        // The FDE's own table replaces the CIE's initial row.
        if (target && target !== cie) target.rows.length = 0;
      } else if (target && /^[0-9a-f]{16} /.test(line)) {
        // A register rule prints as "r9 (r9)": the name alone is kept.
        const [at, cfa, ...values] = line
          .trim()
          .replace(/\br\d+ \((\w+)\)/g, '$1')
          .split(/\s+/);
        target.rows.push({ at: BigInt(`0x${at}`), row: toRow(cfa!, columns, values, target.signal) });
      }
    }
    finishCie();
    fdes.sort((a, b) => (a.start < b.start ? -1 : 1));
    const program = execFileSync('readelf', ['-lW', file], { encoding: 'utf8' });
    const segments: [bigint, bigint, bigint][] = [];
    for (const m of program.matchAll(/LOAD +0x([0-9a-f]+) 0x([0-9a-f]+) 0x[0-9a-f]+ 0x([0-9a-f]+) 0x[0-9a-f]+ R?.?E/g))
      segments.push([BigInt(`0x${m[1]}`), BigInt(`0x${m[2]}`), BigInt(`0x${m[3]}`)]);
    return new ReadelfCfi(fdes, segments);
  }

  /** The file address of file offset `offset` (in an executable segment), or undefined. */
  vaddrOf(offset: bigint): bigint | undefined {
    const segment = this.segments.find(([at, , size]) => offset >= at && offset < at + size);
    return segment && offset - segment[0] + segment[1];
  }

  /** The row of file address `address`. */
  rowAt(address: bigint): UnwindRow | undefined {
    let low = 0;
    let high = this.fdes.length - 1;
    while (low <= high) {
      const mid = (low + high) >> 1;
      const fde = this.fdes[mid]!;
      if (address < fde.start) high = mid - 1;
      else if (address >= fde.end) low = mid + 1;
      else return fde.rows.findLast((row) => row.at <= address)?.row;
    }
    return undefined;
  }
}

function toRow(cfa: string, columns: string[], values: string[], signal: boolean): UnwindRow {
  const registers = new Map<number, RegisterRule>();
  columns.forEach((column, i) => {
    const register = names.indexOf(column);
    const value = values[i]!;
    if (register < 0) throw new Error(`readelf column ${column}`);
    let rule: RegisterRule;
    if (value === 'u') rule = column === 'ra' ? { kind: 'undefined' } : { kind: 'same' };
    else if (value === 's') rule = { kind: 'same' };
    else if (value === 'exp') rule = { kind: 'expression', expression: new Uint8Array() };
    else if (value === 'vexp') rule = { kind: 'valExpression', expression: new Uint8Array() };
    else if (/^c[-+]\d+$/.test(value)) rule = { kind: 'offset', offset: BigInt(value.slice(1)) };
    else if (/^v[-+]\d+$/.test(value)) rule = { kind: 'valOffset', offset: BigInt(value.slice(1)) };
    else if (names.includes(value)) rule = { kind: 'register', register: names.indexOf(value) };
    else throw new Error(`readelf rule ${value}`);
    registers.set(register, rule);
  });
  const offset = /^(\w+)([-+]\d+)$/.exec(cfa);
  return {
    cfa:
      offset && names.includes(offset[1]!)
        ? { kind: 'register', register: names.indexOf(offset[1]!), offset: BigInt(offset[2]!) }
        : { kind: 'expression', expression: new Uint8Array() },
    registers,
    ...(signal && { signalFrame: true }),
  };
}

// The oracle of eh-frame.test.ts: `readelf --debug-dump=frames-interp` (binutils) parsed into its tables, and an
// UnwindRow written the way readelf writes a row, so the two can be compared cell by cell.
import { spawnSync } from 'node:child_process';
import type { UnwindRow } from '../../../src/formats/elf/eh-frame.js';

export interface ReadelfRow {
  loc: number;
  cfa: string;
  /** By readelf's column name (`rbx`, `ra`...), as printed: `u`, `s`, `c-16`, `v+8`, `r6 (rbp)`, `exp`, `vexp`. */
  cells: Map<string, string>;
}

export interface ReadelfEntry {
  offset: number;
  kind: 'CIE' | 'FDE';
  /** FDEs: their CIE's offset and the range they cover. */
  cie?: number;
  pcBegin?: number;
  pcEnd?: number;
  rows: ReadelfRow[];
}

/** readelf's x86-64 DWARF register names (binutils dwarf.c, dwarf_regnames_x86_64), the ones CFI uses. */
export const x86RegisterNames = [
  'rax', 'rdx', 'rcx', 'rbx', 'rsi', 'rdi', 'rbp', 'rsp',
  'r8', 'r9', 'r10', 'r11', 'r12', 'r13', 'r14', 'r15', 'rip',
]; // prettier-ignore

/** The entries readelf prints for `section` (`.eh_frame` or `.debug_frame`) of `file`. */
export function readelfFrames(file: string, section: '.eh_frame' | '.debug_frame'): ReadelfEntry[] {
  // readelf exits 1 after dumping a file whose .gnu_debuglink target it cannot find: its output is whole still.
  const run = spawnSync('readelf', ['--debug-dump=frames-interp', file], { encoding: 'utf8', maxBuffer: 1 << 30 });
  if (run.error || !run.stdout.includes('Contents of the')) throw new Error(`readelf on ${file}: ${run.stderr}`);
  const text = run.stdout;
  const entries: ReadelfEntry[] = [];
  let inSection = false;
  let entry: ReadelfEntry | undefined;
  let columns: string[] = [];
  for (const line of text.split('\n')) {
    const contents = /^Contents of the (\S+) section/.exec(line);
    if (contents) {
      inSection = contents[1] === section;
      entry = undefined;
      continue;
    }
    if (!inSection) continue;
    const head = /^([0-9a-f]{8,16}) [0-9a-f]+ ([0-9a-f]+) (CIE|FDE)/.exec(line);
    if (head) {
      entry = { offset: parseInt(head[1]!, 16), kind: head[3] as 'CIE' | 'FDE', rows: [] };
      const fde = /cie=([0-9a-f]+) pc=([0-9a-f]+)\.\.([0-9a-f]+)/.exec(line);
      if (fde) {
        entry.cie = parseInt(fde[1]!, 16);
        entry.pcBegin = parseInt(fde[2]!, 16);
        entry.pcEnd = parseInt(fde[3]!, 16);
      }
      entries.push(entry);
      continue;
    }
    if (!entry) continue;
    if (/^\s+LOC\s+CFA/.test(line)) {
      columns = line.trim().split(/\s+/).slice(2);
      continue;
    }
    if (/^[0-9a-f]{16} /.test(line)) {
      // `r6 (rbp)` (a DW_CFA_register rule) is one cell.
      const tokens: string[] = [];
      for (const token of line.trim().split(/\s+/))
        if (token.startsWith('(') && tokens.length > 0) tokens[tokens.length - 1] += ` ${token}`;
        else tokens.push(token);
      const cells = new Map(columns.map((name, i) => [name, tokens[i + 2] ?? '']));
      entry.rows.push({ loc: parseInt(tokens[0]!, 16), cfa: tokens[1]!, cells });
    }
  }
  return entries;
}

function registerName(n: number): string {
  return x86RegisterNames[n] ?? `r${n}`;
}

const signed = (n: number) => (n >= 0 ? `+${n}` : `${n}`);

/** The CFA cell readelf prints for `row`. */
export function cfaCell(row: UnwindRow): string {
  return row.cfa.type === 'expression' ? 'exp' : `${registerName(row.cfa.register)}${signed(row.cfa.offset)}`;
}

/** The cell readelf prints for register `n` of `row` (`u` for a register the row gives no rule). */
export function registerCell(row: UnwindRow, n: number): string {
  const rule = row.registers.get(n);
  switch (rule?.type) {
    case undefined:
    case 'undefined':
      return 'u';
    case 'same-value':
      return 's';
    case 'offset':
      return `c${signed(rule.offset)}`;
    case 'val-offset':
      return `v${signed(rule.offset)}`;
    case 'register':
      return `r${rule.register} (${registerName(rule.register)})`;
    case 'expression':
      return 'exp';
    case 'val-expression':
      return 'vexp';
  }
}

/** The DWARF register number of readelf's column `name` (`ra` is the CIE's return-address column). */
export function columnRegister(name: string, returnAddress: number): number {
  if (name === 'ra') return returnAddress;
  const n = x86RegisterNames.indexOf(name);
  if (n < 0) throw new Error(`readelf column ${name} not known to the test`);
  return n;
}

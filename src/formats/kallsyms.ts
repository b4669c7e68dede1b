// The kernel's function symbols from kallsyms text (`address type name [module]`, as /proc/kallsyms and collect's
// target/kallsyms snapshot hold it), as perf reads them (tools/perf/util/symbol.c, kallsyms__parse): text symbols
// (t, T, w, W) only, of symbols at one address the last listed, each ending where the next begins (the kernel's last
// before its modules, and a module's last before the kernel's, a page past their page), the kernel's own moved to
// where the recording's kernel had them when it lay elsewhere (kallsymsDelta). In columns (function-columns.ts) for
// what the kernel writes; as bigint objects (elf-functions.ts) for any other text.
import { lookupTable, sortedAsPerf, type FunctionSymbol, type FunctionTable } from './function-table.js';
import { columnTable, FunctionRows, maxColumnValue } from './function-columns.js';

/**
 * Which perf's rule ends the symbols of size 0 that kallsyms lists (symbols__fixup_end): each at the next symbol,
 * except, in perf 6.1, the kernel's last before its modules and a module's last before the kernel's, which end a page
 * past their page; in perf 6.12 also a module's last before another module's (BPF code may lie between).
 */
export type KallsymsEnds = '6.1' | '6.12';

/**
 * A number for the module a symbol's line names (perf compares the text from its `[` on), 0 for the kernel's own:
 * symbols of different numbers are apart for the end rule. With 6.1's rule every module is one group, and the text is
 * not even read.
 */
class ModuleGroups {
  private readonly numbers = new Map<string, number>();

  constructor(private readonly ends: KallsymsEnds) {}

  /** The group of the module named by `line[from, to)` (a kallsyms line, as text or bytes). */
  group(line: string | Buffer, from: number, to: number): number {
    if (this.ends === '6.1') return 1;
    const module = typeof line === 'string' ? line.slice(from, to) : line.toString('latin1', from, to);
    let number = this.numbers.get(module);
    if (number === undefined) this.numbers.set(module, (number = this.numbers.size + 1));
    return number;
  }
}

/**
 * kallsyms text (`address type name [module]`) to a table of its text symbols; empty when addresses are hidden. In
 * columns, addresses relative to the lowest, names decoded when a lookup returns them; as objects when a line is not
 * what the kernel writes (an address that is not 1 to 16 hex digits) or the addresses span 2^52 or more.
 *
 * `delta`: how far the kernel of the text lay from the recording's (kallsymsDelta), by which its own symbols (not
 * its modules') move, modulo 2^64, as perf's maps__split_kallsyms moves them. `ends`: the rule of the perf that
 * recorded, for where symbols end.
 */
export function kallsymsTable(text: string | Uint8Array, delta = 0n, ends: KallsymsEnds = '6.1'): FunctionTable {
  const bytes =
    typeof text === 'string' ? Buffer.from(text, 'utf8') : Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  // The delta as a signed number, when the columns can hold the moved addresses exactly.
  const signed = BigInt.asIntN(64, delta);
  const shift = signed > -(2n ** 52n) && signed < 2n ** 52n ? Number(signed) : undefined;
  const lines = shift === undefined ? undefined : kallsymsLines(bytes, shift, ends);
  if (!lines) return kallsymsObjects(typeof text === 'string' ? text : bytes.toString('utf8'), delta, ends);
  const { count, base, starts, nameStarts, nameEnds, bindings, groups } = lines;
  if (count === 0) return lookupTable([]);
  const rows = new FunctionRows(count);
  rows.starts.set(starts.subarray(0, count));
  rows.ends.set(starts.subarray(0, count));
  rows.bindings.set(bindings.subarray(0, count));
  rows.count = count;
  const name = (row: number) => bytes.toString('utf8', nameStarts[row], nameEnds[row]);
  return columnTable(rows, name, { functions: count, base, endsFirst: true, groups: groups.subarray(0, count) });
}

/**
 * The address perf's kallsyms__get_function_start finds for `name` in kallsyms text: that of the first symbol of that
 * name (a module's name no match) whose type is a function's (t, T, w, W) or an absolute one's (A); undefined when
 * there is none.
 */
export function kallsymsAddress(text: Uint8Array, name: string): bigint | undefined {
  const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  const needle = Buffer.from(` ${name}\n`);
  const last = Buffer.from(` ${name}`);
  for (let at = bytes.indexOf(needle); ; at = bytes.indexOf(needle, at + 1)) {
    // The last line may end without a newline.
    if (at < 0 && bytes.length >= last.length && bytes.subarray(bytes.length - last.length).equals(last))
      at = bytes.length - last.length;
    if (at < 0) return undefined;
    const type = bytes[at - 1];
    const lineStart = bytes.lastIndexOf(10, at - 1) + 1;
    // `address type name`: the type one letter between the address and the name.
    const typed = type === 0x74 || type === 0x54 || type === 0x77 || type === 0x57 || type === 0x41;
    if (typed && bytes[at - 2] === 32 && at - 2 - lineStart <= 16) {
      const address = bytes.toString('latin1', lineStart, at - 2);
      if (/^[0-9a-fA-F]{1,16}$/.test(address)) return BigInt(`0x${address}`);
    }
    if (at === bytes.length - last.length) return undefined;
  }
}

/**
 * How far the kernel whose kallsyms `text` is lay from the kernel perf.data was recorded on, modulo 2^64 (perf's
 * kallsyms__delta): the address of the reference symbol (`_text`, named in perf.data's kernel mapping record) in
 * the text less its address at recording (the record's pgoff). 0 for the same boot; a kernel placed elsewhere at
 * boot (KASLR) gives another. Undefined when the text has no such symbol: perf's kallsyms load fails then, and it
 * names (next to) no kernel frame.
 */
export function kallsymsDelta(text: Uint8Array, reference: { name: string; address: bigint }): bigint | undefined {
  const found = kallsymsAddress(text, reference.name);
  return found === undefined ? undefined : BigInt.asUintN(64, found - reference.address);
}

/**
 * The text symbols of kallsyms in columns (addresses relative to the lowest, `base`; names as byte ranges), the
 * kernel's own less `shift` (modules' as they are), as kallsymsObjects reads them from the same text; undefined when
 * an address is one kallsymsObjects would read otherwise, or the addresses span maxColumnValue or more.
 */
function kallsymsLines(bytes: Buffer, shift: number, ends: KallsymsEnds) {
  let capacity = (bytes.length >> 5) + 16;
  let starts = new Float64Array(capacity);
  let nameStarts = new Uint32Array(capacity);
  let nameEnds = new Uint32Array(capacity);
  let bindings = new Uint8Array(capacity);
  let groups = new Uint32Array(capacity);
  let count = 0;
  const modules = new ModuleGroups(ends);
  // Addresses relative to the first one's (hi0, lo0) while reading, then to the lowest.
  let hi0 = -1;
  let lo0 = 0;
  let low = 0;
  let high = 0;
  // The next space, tab and `[` at or after where the scan is: each found once, however long the lines without them.
  let nextSpace = -1;
  let nextTab = -1;
  let nextBracket = -1;
  for (let from = 0; from < bytes.length;) {
    const newline = bytes.indexOf(10, from);
    const end = newline < 0 ? bytes.length : newline;
    if (nextSpace < from) nextSpace = bytes.indexOf(32, from) >>> 0;
    const space = Math.min(nextSpace, end);
    const type = space > from && space + 2 < end ? bytes[space + 1] : 0;
    // t, T, w, W
    if ((type === 0x74 || type === 0x54 || type === 0x77 || type === 0x57) && bytes[space + 2] === 32) {
      const hi = space - from > 16 ? -1 : hexValue(bytes, from, space - 8);
      const lo = hexValue(bytes, Math.max(from, space - 8), space);
      if (hi < 0 || lo < 0) return undefined;
      if (nextTab < space + 3) nextTab = bytes.indexOf(9, space + 3) >>> 0;
      const nameEnd = Math.min(nextTab, end);
      if ((hi !== 0 || lo !== 0) && nameEnd > space + 3) {
        if (count === capacity) {
          capacity *= 2;
          starts = grown(starts, capacity);
          nameStarts = grown(nameStarts, capacity);
          nameEnds = grown(nameEnds, capacity);
          bindings = grown(bindings, capacity);
          groups = grown(groups, capacity);
        }
        if (hi0 < 0) [hi0, lo0] = [hi, lo];
        // Exact while the high halves differ by less than 2^20 (past that the span is too wide anyway).
        if (Math.abs(hi - hi0) >= maxColumnValue / 2 ** 32) return undefined;
        // A module's symbol has its module's name after a tab; the kernel's own move by the shift.
        const start = (hi - hi0) * 2 ** 32 + (lo - lo0) - (nextTab < end ? 0 : shift);
        if (nextBracket < space + 3) nextBracket = bytes.indexOf(0x5b, space + 3) >>> 0;
        if (start < low) low = start;
        if (start > high) high = start;
        starts[count] = start;
        nameStarts[count] = space + 3;
        nameEnds[count] = nameEnd;
        groups[count] = nextBracket < end ? modules.group(bytes, nextBracket, end) : 0;
        bindings[count++] = type === 0x54 ? 1 : type === 0x57 ? 2 : 0;
      }
    }
    from = end + 1;
  }
  if (high - low >= maxColumnValue) return undefined;
  if (low < 0) for (let i = 0; i < count; i++) starts[i] = starts[i]! - low;
  const base = (BigInt(Math.max(hi0, 0)) << 32n) + BigInt(lo0) + BigInt(low);
  // A shift that moves an address past either end of the 64-bit space: the objects wrap it as perf does.
  if (base < 0n || base + BigInt(high - low) >= 2n ** 64n) return undefined;
  return { count, base, starts, nameStarts, nameEnds, bindings, groups };
}

/** The hex digits bytes[from, to) as a number (0 when empty), or -1 when one is not a hex digit. */
function hexValue(bytes: Buffer, from: number, to: number): number {
  let value = 0;
  for (let i = from; i < to; i++) {
    const c = bytes[i]!;
    const digit = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

function grown<T extends Float64Array | Uint32Array | Uint8Array>(array: T, capacity: number): T {
  const larger = new (array.constructor as new (length: number) => T)(capacity);
  larger.set(array);
  return larger;
}

/** kallsymsTable as objects with bigint addresses, for text the columns cannot hold. */
function kallsymsObjects(text: string, delta: bigint, ends: KallsymsEnds): FunctionTable {
  const modules = new ModuleGroups(ends);
  const symbols: FunctionSymbol[] = [];
  for (let from = 0; from < text.length;) {
    const newline = text.indexOf('\n', from);
    const end = newline < 0 ? text.length : newline;
    // The first space of the line: a line without one is no symbol (searching past it would go quadratic).
    let space = from;
    while (space < end && text.charCodeAt(space) !== 32) space++;
    const type = space > from && space + 2 < end ? text[space + 1]! : '';
    if ((type === 't' || type === 'T' || type === 'w' || type === 'W') && text[space + 2] === ' ') {
      const rest = text.slice(space + 3, end);
      const tab = rest.indexOf('\t');
      const name = tab < 0 ? rest : rest.slice(0, tab);
      const address = text.slice(from, space);
      // An address that is no hex number (a forged snapshot) names nothing, rather than failing the run.
      const read = /^[0-9a-fA-F]{1,16}$/.test(address) ? BigInt(`0x${address}`) : 0n;
      const start = tab < 0 ? BigInt.asUintN(64, read - delta) : read;
      const bracket = rest.indexOf('[');
      const group = bracket < 0 ? 0 : modules.group(rest, bracket, rest.length);
      if (read !== 0n && name)
        symbols.push({ start, end: start, name, binding: type === 'T' ? 1 : type === 'W' ? 2 : 0, group });
    }
    from = end + 1;
  }
  return lookupTable(sortedAsPerf(symbols, true));
}

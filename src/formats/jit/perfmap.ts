// perf-PID.map bytes in (the copy collect took of a .NET process's /tmp/perf-<nspid>.map), code ranges with names out.
// Each line is `<hex start> <hex size> <name>`. The runtime prints the start with `%p`, so a `0x` prefix may or may
// not be there; names contain spaces and brackets; the same range can appear twice (a method re-JIT-ed at the same
// address, a replay after EnablePerfMap) and the runtime may still have been writing the last line when the copy was
// taken. Pure: the caller reads the file.
//
// A big service's map holds a million lines (~150 MB), so it is read from its bytes without ever becoming one string,
// into a SymbolTable whose names stay slices of those bytes. Lines that are not plain ASCII (rare: .NET names are
// ASCII unless a type is named otherwise) go through the line pattern as text, so both ways give the same result.

import { isAscii } from 'node:buffer';
import { SymbolTable, type CodeSymbol } from './symbol-table.js';

export interface ParsePerfMapResult {
  /** Entries in file order: when ranges overlap, the later one is the newer code. */
  symbols: CodeSymbol[];
  /** Non-blank lines that were not `start size name`, or had a size of 0. */
  skipped: number;
  /** True when the text did not end with a newline: its last line was dropped, as it may have been cut short. */
  truncated: boolean;
}

/** ParsePerfMapResult with the entries in columns. */
export interface ReadPerfMapResult extends Omit<ParsePerfMapResult, 'symbols'> {
  symbols: SymbolTable;
}

const linePattern = /^(?:0[xX])?([0-9a-fA-F]{1,16}) +(?:0[xX])?([0-9a-fA-F]{1,16}) +(\S.*)$/;

/** Parses a whole perf map into objects (small maps, tests); `readPerfMap` keeps big ones compact. */
export function parsePerfMap(text: string | Uint8Array): ParsePerfMapResult {
  const { symbols, ...counts } = readPerfMap(text);
  return { symbols: symbols.toArray(), ...counts };
}

/** Parses a whole perf map (UTF-8 bytes, or text) into a SymbolTable that keeps `data` for the names. */
export function readPerfMap(data: Uint8Array | string): ReadPerfMapResult {
  const bytes =
    typeof data === 'string' ? Buffer.from(data, 'utf8') : Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  let lines = 0;
  for (let nl = bytes.indexOf(10); nl >= 0; nl = bytes.indexOf(10, nl + 1)) lines++;
  const result: ReadPerfMapResult = { symbols: new SymbolTable(lines), skipped: 0, truncated: false };
  const line = new LineReader(bytes, result.symbols);
  let from = 0;
  for (let nl = bytes.indexOf(10); nl >= 0; from = nl + 1, nl = bytes.indexOf(10, from)) {
    const end = nl > from && bytes[nl - 1] === 13 ? nl - 1 : nl;
    if (!line.read(from, end) && !isBlank(bytes, from, end)) result.skipped++;
  }
  // A last line without its newline may be cut anywhere, the size field included: a wrong size would name the
  // wrong frames, so it is dropped.
  if (!isBlank(bytes, from, bytes.length)) result.truncated = true;
  return result;
}

/** Parses one complete perf-map line, or returns undefined when it is not one. */
export function parsePerfMapLine(line: string): CodeSymbol | undefined {
  const m = linePattern.exec(line);
  if (!m) return undefined;
  const size = BigInt(`0x${m[2]!}`);
  if (size === 0n) return undefined;
  return { start: BigInt(`0x${m[1]!}`), size, name: m[3]!.trimEnd() };
}

/** Reads lines of `bytes` into `table`, as linePattern would read them as text. */
class LineReader {
  /** Whether a line can hold a byte that is not ASCII or a carriage return (worth looking for only if the file does). */
  private readonly mixed: boolean;
  private readonly chunk: number;
  // The last hex number read, in 32-bit halves.
  private hi = 0;
  private lo = 0;

  constructor(
    private readonly bytes: Buffer,
    private readonly table: SymbolTable,
  ) {
    this.mixed = !isAscii(bytes) || bytes.includes(13);
    this.chunk = table.addChunk(bytes);
  }

  /** Adds the entry on bytes [from, end); false when there is none (the line is blank or not an entry). */
  read(from: number, end: number): boolean {
    const bytes = this.bytes;
    let i = this.hex(from, end);
    if (i < 0) return this.slowly(from, end);
    const startHi = this.hi;
    const startLo = this.lo;
    i = this.hex(i, end);
    if (i < 0 || (this.hi === 0 && this.lo === 0)) return this.slowly(from, end);
    const name = i;
    // `\S`: the name starts with anything but white space (spaces were skipped by hex()).
    if (i >= end || isAsciiSpace(bytes[i]!)) return this.slowly(from, end);
    let last = end;
    if (this.mixed) {
      // `.` matches no carriage return; anything not ASCII goes the slow way.
      for (let k = i; k < end; k++) if (bytes[k]! >= 0x80 || bytes[k] === 13) return this.slowly(from, end);
    }
    while (last > name && isAsciiSpace(bytes[last - 1]!)) last--;
    this.table.add(startHi, startLo, this.hi, this.lo, this.chunk, name, last - name);
    return true;
  }

  /**
   * Reads `(?:0[xX])?[0-9a-fA-F]{1,16} +` from `i` into hi and lo; returns where the spaces end, or -1. The `0x`
   * prefix is taken whenever it is there: without it the digits would be `0` followed by `x`, never a match.
   */
  private hex(i: number, end: number): number {
    const bytes = this.bytes;
    if (i + 1 < end && bytes[i] === 0x30 && (bytes[i + 1]! | 0x20) === 0x78) i += 2;
    let hi = 0;
    let lo = 0;
    let digits = 0;
    for (; i < end; i++, digits++) {
      const d = hexDigit(bytes[i]!);
      if (d < 0) break;
      hi = ((hi << 4) | (lo >>> 28)) >>> 0;
      lo = ((lo << 4) | d) >>> 0;
    }
    if (digits === 0 || digits > 16 || i >= end || bytes[i] !== 0x20) return -1;
    while (i < end && bytes[i] === 0x20) i++;
    this.hi = hi;
    this.lo = lo;
    return i;
  }

  /** A line the fast reading refused: the pattern decides, on the line as text (it is then most likely no entry). */
  private slowly(from: number, end: number): boolean {
    if (!this.mixed) return false; // pure ASCII without carriage returns: the fast reading is the pattern's
    const symbol = parsePerfMapLine(this.bytes.toString('utf8', from, end));
    if (!symbol) return false;
    this.table.addString(symbol.start, symbol.size, symbol.name);
    return true;
  }
}

function hexDigit(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const lower = c | 0x20;
  if (lower >= 0x61 && lower <= 0x66) return lower - 0x61 + 10;
  return -1;
}

/** JavaScript's white space among ASCII bytes (`\s`): tab, line feed, vertical tab, form feed, carriage return, space. */
function isAsciiSpace(c: number): boolean {
  return c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/** Whether bytes [from, end) are all white space to String.prototype.trim (Unicode spaces included). */
function isBlank(bytes: Buffer, from: number, end: number): boolean {
  for (let k = from; k < end; k++) {
    const c = bytes[k]!;
    if (c >= 0x80) return bytes.toString('utf8', from, end).trim() === '';
    if (!isAsciiSpace(c)) return false;
  }
  return true;
}

// The function symbols of a 64-bit little-endian ELF file as perf uses them to name frames (tools/perf/util/
// symbol-elf.c, symbol.c): `.symtab` when the file has one, else `.dynsym`; functions, GNU ifuncs and named labels in
// code sections; each symbol moved from its virtual address to its file offset (perf names a user frame by its offset
// in the mapped file); symbols at one address reduced to the one perf prefers; a symbol of size 0 ending where the
// next begins. Takes a ByteSource (elf.ts), gives a sorted table to look file offsets up in, in columns
// (function-columns.ts: names decoded and demangled when a lookup returns them), or as bigint objects for a file whose
// values reach 2^52. Reads are bounded by `limits`: a forged header yields an error, never a huge allocation.
import { demangle, type DemangleForm } from './demangle.js';
import { lookupTable, nameOf, sortedAsPerf, type FunctionSymbol, type FunctionTable } from '../function-table.js';
import { sectionTypes, type ByteSource } from './elf.js';
import { columnTable, FunctionRows, maxColumnValue } from '../function-columns.js';

export const elfFunctionLimits = Object.freeze({
  maxSections: 1 << 16,
  /** A symbol table of a few million symbols (libxul has about 400 000). */
  maxSymbolBytes: 256 << 20,
  maxStringBytes: 256 << 20,
});

const STT_NOTYPE = 0;
const STT_FUNC = 2;
const STT_GNU_IFUNC = 10;
const STB_GLOBAL = 1;
const SHN_UNDEF = 0;
const SHN_LORESERVE = 0xff00;
const SHN_ABS = 0xfff1;

interface Section {
  name: number;
  type: number;
  flags: bigint;
  addr: bigint;
  offset: bigint;
  size: bigint;
  link: number;
  align: bigint;
  entsize: bigint;
}

interface Segment {
  vaddr: bigint;
  memsz: bigint;
  offset: bigint;
}

/** `length` bytes of `source` at `offset` as a Buffer (a view of what the source gave, not a copy). */
async function bytesAt(source: ByteSource, offset: number, length: number): Promise<Buffer> {
  const bytes = await source.read(offset, length);
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

async function elfHeader(source: ByteSource): Promise<Buffer | undefined> {
  const header = await bytesAt(source, 0, 64);
  if (header.length < 64 || header.readUInt32BE(0) !== 0x7f454c46 || header[4] !== 2 || header[5] !== 1)
    return undefined;
  return header;
}

/**
 * The section headers of the 64-bit little-endian ELF whose header is `header` (from elfHeader): every whole entry of
 * the table; undefined when the header gives no table a reader may take (entries too small, too many, past the end).
 */
async function readSectionHeaders(source: ByteSource, header: Buffer): Promise<Section[] | undefined> {
  const shoff = header.readBigUInt64LE(0x28);
  const shentsize = header.readUInt16LE(0x3a);
  const shnum = header.readUInt16LE(0x3c);
  if (shentsize < 64 || shnum === 0 || shnum > elfFunctionLimits.maxSections || shoff > BigInt(source.size))
    return undefined;
  const table = await bytesAt(source, Number(shoff), shnum * shentsize);
  const sections: Section[] = [];
  for (let at = 0; at + shentsize <= table.length; at += shentsize)
    sections.push({
      name: table.readUInt32LE(at),
      type: table.readUInt32LE(at + 4),
      flags: table.readBigUInt64LE(at + 8),
      addr: table.readBigUInt64LE(at + 16),
      offset: table.readBigUInt64LE(at + 24),
      size: table.readBigUInt64LE(at + 32),
      link: table.readUInt32LE(at + 40),
      align: table.readBigUInt64LE(at + 48),
      entsize: table.readBigUInt64LE(at + 56),
    });
  return sections;
}

/** A section's name in the section-name table `names` (empty when the table holds none). */
function sectionName(names: Buffer, section: Section): string {
  const end = names.indexOf(0, section.name);
  return names.toString('latin1', section.name, end < 0 ? names.length : end);
}

/** The PT_LOAD segments of an ELF: perf moves a symbol to its file offset by the segment holding it. */
export async function readLoadSegments(source: ByteSource): Promise<Segment[]> {
  const header = await elfHeader(source);
  if (!header) return [];
  const phoff = header.readBigUInt64LE(0x20);
  const phentsize = header.readUInt16LE(0x36);
  const phnum = header.readUInt16LE(0x38);
  if (phentsize < 56 || phoff > BigInt(source.size)) return [];
  const table = await bytesAt(source, Number(phoff), phnum * phentsize);
  const segments: Segment[] = [];
  for (let at = 0; at + 56 <= table.length; at += phentsize)
    if (table.readUInt32LE(at) === 1)
      segments.push({
        offset: table.readBigUInt64LE(at + 8),
        vaddr: table.readBigUInt64LE(at + 16),
        memsz: table.readBigUInt64LE(at + 40),
      });
  return segments;
}

/**
 * The function table of the ELF in `source`, empty when it is not a 64-bit little-endian ELF with symbols. Symbols
 * are moved to file offsets by the load segments of `runtime` (the mapped file, when `source` is its debug file).
 */
/**
 * `demangle`: C++ names as perf prints them (true: as perf 6.1 does; or the DemangleForm of the perf that recorded), or
 * as they are (false: perf script --no-demangle). `plt`: the PLT entries as perf 6.1 synthesizes them, or as perf 6.12
 * does (readPltSymbols).
 */
export async function readFunctionTable(
  source: ByteSource,
  runtime: ByteSource = source,
  { demangle: demangleAs = true, plt: pltRules = '6.1' }: { demangle?: boolean | DemangleForm; plt?: PltRules } = {},
): Promise<FunctionTable> {
  const demangling: DemangleForm | false = demangleAs === true ? 'perf6.1' : demangleAs;
  const header = await elfHeader(source);
  if (!header) return lookupTable([]);
  const segments = await readLoadSegments(runtime);
  const sections = await readSectionHeaders(source, header);
  if (!sections) return lookupTable([]);
  const present = (s: Section) => s.type !== sectionTypes.NOBITS && s.size > 0n;
  const symbols =
    sections.find((s) => s.type === sectionTypes.SYMTAB && present(s)) ??
    sections.find((s) => s.type === sectionTypes.DYNSYM && present(s));
  const strings = symbols && sections[symbols.link];
  if (!symbols || !strings || !present(strings)) return lookupTable([]);
  if (
    symbols.size > BigInt(elfFunctionLimits.maxSymbolBytes) ||
    strings.size > BigInt(elfFunctionLimits.maxStringBytes)
  )
    return lookupTable([]);
  const names = sections[header.readUInt16LE(0x3e)];
  const sectionNames =
    names && present(names) && names.size <= BigInt(elfFunctionLimits.maxStringBytes)
      ? await bytesAt(source, Number(names.offset), Number(names.size))
      : Buffer.alloc(0);
  // Which sections are named like `.text` (perf's labels live there), asked once per section.
  const textSections = new Map<number, boolean>();
  const isText = (index: number) => {
    let text = textSections.get(index);
    if (text === undefined)
      textSections.set(index, (text = sectionName(sectionNames, sections[index]!).includes('text')));
    return text;
  };
  const symBytes = await bytesAt(source, Number(symbols.offset), Number(symbols.size));
  const strBytes = await bytesAt(source, Number(strings.offset), Number(strings.size));
  // perf adds the PLT's entries after the symbol tables' fixes, from the mapped file.
  const plt = await readPltSymbols(runtime, demangling, pltRules).catch(() => []);
  const entries: SymbolEntries = { symBytes, words: entryWords(symBytes), strBytes, sections, isText, demangling };
  return columnFunctions(entries, segments, plt) ?? objectFunctions(entries, segments, plt);
}

/** What readFunctionTable read of a file: its symbol table, string table and sections. */
interface SymbolEntries {
  symBytes: Buffer;
  /** symBytes as little-endian 32-bit words. */
  words: Uint32Array;
  strBytes: Buffer;
  sections: Section[];
  isText: (section: number) => boolean;
  demangling: DemangleForm | false;
}

/**
 * Calls `take` for each symbol of the table that perf keeps as a function (before moving it to its file offset):
 * `nameAt` in the string table; `mangled` when its name is to be demangled; `named` its name when already demangled.
 * Stops at the first `take` that returns false, and returns false then.
 */
function eachFunction(
  { symBytes, words, strBytes, sections, isText, demangling }: SymbolEntries,
  take: (at: number, nameAt: number, mangled: boolean, named: string | undefined) => boolean,
): boolean {
  // Whether any name holds a `$`: most string tables have none, and then no name needs looking at.
  const dollars = strBytes.indexOf(0x24) >= 0;
  for (let at = 0; at + 24 <= symBytes.length; at += 24) {
    const nameAt = words[at >> 2]!;
    const info = symBytes[at + 4]!;
    const shndx = words[(at >> 2) + 1]! >>> 16;
    const type = info & 0xf;
    if (nameAt === 0 || shndx === SHN_UNDEF || (shndx >= SHN_LORESERVE && shndx !== SHN_ABS)) continue;
    if (!sections[shndx]) continue;
    // perf's labels: untyped symbols of default or protected visibility in a section named like `.text`.
    const visibility = symBytes[at + 5]! & 3;
    const label = type === STT_NOTYPE && shndx !== SHN_ABS && visibility !== 1 && visibility !== 2 && isText(shndx);
    if (!(type === STT_FUNC || type === STT_GNU_IFUNC || label)) continue;
    if (nameAt >= strBytes.length) continue;
    // perf demangles C++ names as it loads them, before it chooses among symbols at one address: the choice (prefer)
    // demangles those it compares, lookups the rest. A demangled name holds a `$` only where the mangled one does.
    const mangled = demangling !== false && strBytes[nameAt] === 0x5f && strBytes[nameAt + 1] === 0x5a;
    let named: string | undefined;
    if (mangled && dollars) {
      const raw = cString(strBytes, nameAt);
      if (raw.includes('$')) named = demangle(raw, demangling || undefined) ?? raw;
    }
    // ARM mapping symbols ($a, $d, $x) are not functions.
    if (named ? named.startsWith('$') : !mangled && strBytes[nameAt] === 0x24) continue;
    if (!take(at, nameAt, mangled, named)) return false;
  }
  return true;
}

/** The NUL-terminated UTF-8 string at `at` of a string table. */
function cString(strBytes: Buffer, at: number): string {
  const nul = strBytes.indexOf(0, at);
  return strBytes.toString('utf8', at, nul < 0 ? strBytes.length : nul);
}

const littleEndianHost = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;

/** The little-endian 32-bit words of `bytes` (a symbol table: whole 24-byte entries), read with one load each. */
function entryWords(bytes: Buffer): Uint32Array {
  const count = bytes.length >> 2;
  if (littleEndianHost && bytes.byteOffset % 4 === 0) return new Uint32Array(bytes.buffer, bytes.byteOffset, count);
  const words = new Uint32Array(count);
  for (let i = 0; i < count; i++) words[i] = bytes.readUInt32LE(i * 4);
  return words;
}

const twoTo32 = 2 ** 32;
/** The 64-bit value in words `i` (low half) and `i + 1` as a double, or -1 when it is maxColumnValue or more. */
function columnValue(words: Uint32Array, i: number): number {
  const hi = words[i + 1]!;
  return hi >= maxColumnValue / twoTo32 ? -1 : hi * twoTo32 + words[i]!;
}

/**
 * The table in columns (function-columns.ts), names read from the string table when a lookup or a tie asks; undefined
 * when a value is too large for them (a forged file), for objectFunctions to build.
 */
function columnFunctions(
  entries: SymbolEntries,
  segments: Segment[],
  plt: FunctionSymbol[],
): FunctionTable | undefined {
  const limit = BigInt(maxColumnValue);
  if (segments.some((s) => s.vaddr >= limit || s.memsz >= limit || s.offset >= limit)) return undefined;
  if (plt.some((s) => s.start >= limit || s.end >= limit)) return undefined;
  const vaddrs = segments.map((s) => Number(s.vaddr));
  const vends = segments.map((s) => Number(s.vaddr + s.memsz));
  const offsets = segments.map((s) => Number(s.offset));
  const candidates = Math.floor(entries.symBytes.length / 24);
  const rows = new FunctionRows(candidates + plt.length);
  const nameAts = new Uint32Array(candidates);
  const mangled = new Uint8Array(candidates);
  const named = new Map<number, string>();
  const { symBytes, words, strBytes } = entries;
  const form = entries.demangling || undefined;
  const complete = eachFunction(entries, (at, nameAt, isMangled, demangled) => {
    const value = columnValue(words, (at >> 2) + 2);
    const size = columnValue(words, (at >> 2) + 4);
    if (value < 0 || size < 0) return false;
    // perf's elf_read_program_header: a symbol in no load segment is dropped.
    let segment = 0;
    while (segment < vaddrs.length && !(value >= vaddrs[segment]! && value < vends[segment]!)) segment++;
    if (segment === vaddrs.length) return true;
    const start = value - vaddrs[segment]! + offsets[segment]!;
    if (start >= maxColumnValue || start + size >= maxColumnValue) return false;
    const row = rows.push(start, start + size, symBytes[at + 4]! >> 4);
    nameAts[row] = nameAt;
    mangled[row] = isMangled ? 1 : 0;
    if (demangled !== undefined) named.set(row, demangled);
    return true;
  });
  if (!complete) return undefined;
  const functions = rows.count;
  for (const sym of plt) rows.push(Number(sym.start), Number(sym.end), sym.binding);
  const name = (row: number) => {
    if (row >= functions) return nameOf(plt[row - functions]!);
    const known = named.get(row);
    if (known !== undefined) return known;
    const raw = cString(strBytes, nameAts[row]!);
    return mangled[row] ? (demangle(raw, form) ?? raw) : raw;
  };
  return columnTable(rows, name, { functions });
}

/** The table as objects with bigint addresses: for files whose values the columns cannot hold. */
function objectFunctions(entries: SymbolEntries, segments: Segment[], plt: FunctionSymbol[]): FunctionTable {
  const { symBytes, strBytes } = entries;
  const syms: FunctionSymbol[] = [];
  eachFunction(entries, (at, nameAt, mangled, named) => {
    const value = symBytes.readBigUInt64LE(at + 8);
    const size = symBytes.readBigUInt64LE(at + 16);
    const segment = segments.find((seg) => value >= seg.vaddr && value < seg.vaddr + seg.memsz);
    if (!segment) return true;
    const start = value - segment.vaddr + segment.offset;
    // One shape for every symbol (no spread): the fixes and lookups stay monomorphic.
    syms.push({
      start,
      end: start + size,
      name: named ?? cString(strBytes, nameAt),
      binding: symBytes[at + 4]! >> 4,
      mangledSuffix: mangled && named === undefined ? '' : undefined,
      demangleForm: entries.demangling || undefined,
    });
    return true;
  });
  const functions = sortedAsPerf(syms);
  if (plt.length === 0) return lookupTable(functions);
  return lookupTable([...functions, ...plt].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0)));
}

const EM_X86_64 = 62;

export type PltRules = '6.1' | '6.12';

/**
 * perf's dso__synthesize_plt_symbols on x86-64: entry i of `.plt` (after a header of one entry) is `<name>@plt`, the
 * name that of the dynamic symbol of relocation i of `.rela.plt`. perf 6.1 needs `.plt`'s sh_entsize; perf 6.12 takes
 * 8 or 16 from its alignment when sh_entsize is neither (libcoreclr.so's is 0), names the header `.plt`, reads the
 * entries in `.plt.sec` when there is one (the header symbol then covers all of `.plt`), and sees no header in a
 * `.plt` holding exactly one entry per relocation.
 */
async function readPltSymbols(
  source: ByteSource,
  demangling: DemangleForm | false,
  rules: PltRules,
): Promise<FunctionSymbol[]> {
  const found = await x86Sections(source);
  if (!found) return [];
  const { sections, named } = found;
  const rela = named('.rela.plt');
  const plt = named('.plt');
  const dynsym = rela && sections[rela.link];
  const dynstr = dynsym && sections[dynsym.link];
  if (!rela || rela.type !== sectionTypes.RELA || !plt || !dynsym || !dynstr) return [];
  if (rules === '6.1' && plt.entsize === 0n) return [];
  const limit = BigInt(elfFunctionLimits.maxSymbolBytes);
  if (rela.size > limit || dynsym.size > limit || dynstr.size > BigInt(elfFunctionLimits.maxStringBytes)) return [];
  const relocations = await bytesAt(source, Number(rela.offset), Number(rela.size));
  const pltNames = await relocationNames(source, relocations, dynsym, dynstr);
  const out: FunctionSymbol[] = [];
  let entry = plt.entsize;
  let start = plt.offset + entry;
  if (rules === '6.12') {
    if (entry !== 8n && entry !== 16n) entry = plt.align === 8n ? 8n : 16n;
    const sec = named('.plt.sec');
    const entries = BigInt(Math.floor(relocations.length / 24));
    if (sec) {
      out.push({ start: plt.offset, end: plt.offset + plt.size, name: '.plt', binding: STB_GLOBAL });
      start = sec.offset;
    } else if (entries * entry === plt.size) start = plt.offset;
    else {
      out.push({ start: plt.offset, end: plt.offset + entry, name: '.plt', binding: STB_GLOBAL });
      start = plt.offset + entry;
    }
  }
  for (const raw of pltNames) {
    const symbol: FunctionSymbol =
      demangling && raw.startsWith('_Z')
        ? { start, end: start + entry, name: raw, binding: STB_GLOBAL, mangledSuffix: '@plt', demangleForm: demangling }
        : { start, end: start + entry, name: `${raw}@plt`, binding: STB_GLOBAL };
    out.push(symbol);
    start += entry;
  }
  return out;
}

/**
 * The file offsets of an x86-64 file's PLT sections, from `.plt` to the end of `.plt.sec`, when it has a `.plt.sec` (a
 * build with indirect-branch tracking, as Ubuntu builds everything): where perf up to 6.2 names frames wrongly. It
 * synthesizes the PLT's entries in `.plt`, where code never calls them, after extending the symbol before the PLT (a
 * zero-size `_init`) up to the next one, so a call through `.plt.sec` is named `_init+0x50`, or `[unknown]`, as its
 * symbol tree's shape decides. Undefined for other files.
 */
export async function pltSecRange(source: ByteSource): Promise<{ start: bigint; end: bigint } | undefined> {
  const named = (await x86Sections(source))?.named;
  if (!named) return undefined;
  const [plt, sec] = [named('.plt'), named('.plt.sec')];
  if (!sec || sec.size === 0n) return undefined;
  const start = plt && plt.offset < sec.offset ? plt.offset : sec.offset;
  return { start, end: sec.offset + sec.size };
}

/** An x86-64 file's section headers, and its sections by name; undefined for another file or a forged name table. */
async function x86Sections(
  source: ByteSource,
): Promise<{ sections: Section[]; named: (wanted: string) => Section | undefined } | undefined> {
  const header = await elfHeader(source);
  if (!header || header.readUInt16LE(0x12) !== EM_X86_64) return undefined;
  const sections = await readSectionHeaders(source, header);
  const names = sections?.[header.readUInt16LE(0x3e)];
  if (!sections || !names || names.size > BigInt(elfFunctionLimits.maxStringBytes)) return undefined;
  const nameBytes = await bytesAt(source, Number(names.offset), Number(names.size));
  return { sections, named: (wanted) => sections.find((sec) => sectionName(nameBytes, sec) === wanted) };
}

/** How many bytes of `section` a read of all of it gives (the file may end inside it). */
function readableLength(source: ByteSource, section: Section): number {
  return Math.max(0, Math.min(Number(section.size), source.size - Number(section.offset)));
}

/**
 * The name of the dynamic symbol of each relocation (`''` for an index past the table), reading only the part of the
 * tables that holds them: /usr/bin/node's are 7 MB for 500 names.
 */
async function relocationNames(
  source: ByteSource,
  relocations: Buffer,
  dynsym: Section,
  dynstr: Section,
): Promise<string[]> {
  const indices: number[] = [];
  for (let at = 0; at + 24 <= relocations.length; at += 24)
    indices.push(Number(relocations.readBigUInt64LE(at + 8) >> 32n));
  const symbolBytes = readableLength(source, dynsym);
  const [first, last] = extent(indices.filter((index) => index * 24 + 24 <= symbolBytes));
  const symbols =
    first <= last
      ? await bytesAt(source, Number(dynsym.offset) + first * 24, (last - first + 1) * 24)
      : Buffer.alloc(0);
  const nameAts = indices.map((index) =>
    index * 24 + 24 <= symbolBytes ? symbols.readUInt32LE((index - first) * 24) : 0,
  );
  // The names from the lowest to a page past the highest; all of the table when one runs on past that.
  const stringBytes = readableLength(source, dynstr);
  const inTable = nameAts.filter((at) => at < stringBytes);
  const [lowest, highest] = extent(inTable);
  let base = lowest;
  let strings =
    base <= highest
      ? await bytesAt(source, Number(dynstr.offset) + base, Math.min(stringBytes, highest + 4096) - base)
      : Buffer.alloc(0);
  if (base + strings.length < stringBytes && inTable.some((at) => strings.indexOf(0, at - base) < 0)) {
    base = 0;
    strings = await bytesAt(source, Number(dynstr.offset), Number(dynstr.size));
  }
  return nameAts.map((at) => (at < stringBytes ? cString(strings, at - base) : ''));
}

/** The lowest and highest of `values` (Infinity and -Infinity when there are none). */
function extent(values: number[]): [number, number] {
  let low = Infinity;
  let high = -Infinity;
  for (const value of values) {
    if (value < low) low = value;
    if (value > high) high = value;
  }
  return [low, high];
}

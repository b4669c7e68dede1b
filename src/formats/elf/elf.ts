// An ELF file (or any byte source) in, what symbol lookup needs out: the GNU build-id, the `.gnu_debuglink` target,
// and whether the file carries its own `.symtab` and DWARF. Reads only the headers, the section-name table and the
// small sections it needs, each under a size limit, so a truncated or hostile file costs a few kilobytes and ends in
// an ELF_MALFORMED error, never a crash or an unbounded read. A path naming a FIFO, a directory, a device or a socket
// is refused (BAD_INPUT) before anything reads it, so it cannot block or fail in odd ways.
import { constants, type Stats } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../../error.js';
import { openForReading } from '../../files/bounded-read.js';
import type { PathHandle } from '../../files/rooted.js';

/** Random access to the bytes of a file. `read` may return fewer bytes than asked only at the end of the source. */
export interface ByteSource {
  readonly size: number;
  read(offset: number, length: number): Promise<Uint8Array>;
}

export interface ElfInfo {
  /** 32 or 64 (EI_CLASS). */
  bits: 32 | 64;
  littleEndian: boolean;
  /** e_machine (62 = x86-64, 183 = aarch64). */
  machine: number;
  /** The NT_GNU_BUILD_ID note as lower-case hex, if the file has one. */
  buildId: string | undefined;
  /** The `.gnu_debuglink` section: the debug file's name and the CRC32 of its contents. */
  debugLink: { file: string; crc32: number } | undefined;
  /** A non-empty `.symtab` (static functions have names). */
  hasSymtab: boolean;
  /** DWARF present (`.debug_info` or `.zdebug_info` with contents). */
  hasDebugInfo: boolean;
  /** `.text` holds code (false in a debug-only file made by `objcopy --only-keep-debug`). */
  hasCode: boolean;
  /**
   * The byte ranges perf reads to name the file's frames, sorted and merged: the ELF, program and section headers,
   * symbol and string tables, notes, relocations, dynamic and version sections, the PLT. A copy holding only these
   * (holes elsewhere, see src/binaries/kept-binaries.ts) names every frame the whole file names, for a fraction of
   * its bytes: code and data are most of a binary.
   */
  namingRanges: [number, number][];
  /** The byte ranges of its call frame information (`.eh_frame`, `.eh_frame_hdr`, `.debug_frame`), to unwind by. */
  unwindRanges: [number, number][];
}

/** Limits on what one file may make the reader load. */
export const elfReadLimits = Object.freeze({
  /** Section headers read at most (files with more are refused). */
  maxSections: 65_536,
  /** Largest section-name table read. */
  maxSectionNamesBytes: 1 << 20,
  /** Largest note section or segment scanned for the build-id. */
  maxNoteBytes: 1 << 16,
  /** Largest `.gnu_debuglink` section read. */
  maxDebugLinkBytes: 4096,
});

/** The section types (sh_type) profcpu's ELF readers look for: here and in elf-functions.ts. */
export const sectionTypes = Object.freeze({ SYMTAB: 2, RELA: 4, NOTE: 7, NOBITS: 8, DYNSYM: 11 });
const PT_NOTE = 4;
const NT_GNU_BUILD_ID = 3;

interface Section {
  name: string;
  type: number;
  /**
   * sh_addr: the section's virtual address (0 when it is not loaded); undefined past 2^53 (a kernel's sections), which
   * only readSectionContents needs and refuses, so that every other reader still takes such a file.
   */
  addr: number | undefined;
  offset: number;
  size: number;
  entsize: number;
  align: number;
}

function malformed(what: string, detail: string): ProfcpuError {
  return new ProfcpuError('ELF_MALFORMED', `${what}: not a usable ELF file (${detail})`, {
    remedy: 'Check that the path names a complete ELF binary or debug file; a partial copy or download cannot be used.',
  });
}

/**
 * Reads the build-id, debuglink and symbol presence of the ELF file at `path`; `label` names it in errors. Anything
 * but a regular file (a FIFO, a directory, a device, a socket) is a BAD_INPUT error, found before any read.
 */
export async function readElfFile(path: string, label = path): Promise<ElfInfo> {
  const cannot = (what: string, cause: unknown) =>
    new ProfcpuError('IO', `cannot ${what} ${path}: ${(cause as Error).message}`, {
      remedy: 'Check the path and that profcpu may read it (run as root to read another container’s files).',
      cause,
    });
  // Checked before opening too: opening a device can act on it (a watchdog starts counting, a tape rewinds).
  const before = await stat(path).catch((cause: unknown) => {
    throw cannot('open', cause);
  });
  if (!before.isFile()) throw notAFile(label, before);
  let handle;
  try {
    // NONBLOCK: the path may have become a FIFO since, and opening one for reading waits for a writer for ever; with
    // it the open returns at once, and the fstat below refuses the FIFO before anything reads it (on a regular file
    // the flag changes nothing). NOCTTY: a terminal opened here must not become profcpu's controlling terminal.
    handle = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (cause) {
    throw cannot('open', cause);
  }
  try {
    // The handle's own file, whatever the path names now.
    const opened = await handle.stat().catch((cause: unknown) => {
      throw cannot('read', cause);
    });
    if (!opened.isFile()) throw notAFile(label, opened);
    return await readElf(
      fileByteSource(handle, opened.size, (cause) => cannot('read', cause)),
      label,
    );
  } finally {
    await handle.close();
  }
}

const fileKinds: readonly [string, (s: Stats) => boolean][] = [
  ['a directory', (s) => s.isDirectory()],
  ['a FIFO', (s) => s.isFIFO()],
  ['a character device', (s) => s.isCharacterDevice()],
  ['a block device', (s) => s.isBlockDevice()],
  ['a socket', (s) => s.isSocket()],
];

function notAFile(label: string, stats: Stats): ProfcpuError {
  const kind = fileKinds.find(([, is]) => is(stats))?.[0] ?? 'not a regular file';
  return new ProfcpuError('BAD_INPUT', `${label}: ${kind}, not an ELF file`, {
    remedy: 'Name a regular file: the ELF library or executable itself, or its debug file.',
  });
}

/** A ByteSource over an open file of known size; `fail` turns a read error into the caller's error. */
export function fileByteSource(file: FileHandle, size: number, fail: (cause: unknown) => Error): ByteSource {
  return {
    size,
    async read(offset, length) {
      const buffer = Buffer.alloc(Math.max(0, Math.min(length, size - offset)));
      const { bytesRead } = await file.read(buffer, 0, buffer.length, offset).catch((cause: unknown) => {
        throw fail(cause);
      });
      return buffer.subarray(0, bytesRead);
    },
  };
}

/** Reads the ELF facts of the regular file behind `handle` (found with TargetFiles or RootedTree). */
export async function readElfAt(handle: PathHandle, label = handle.path): Promise<ElfInfo> {
  const cannot = (what: string, cause: unknown) =>
    new ProfcpuError('IO', `cannot ${what} ${label}: ${(cause as Error).message}`, { cause });
  let file: FileHandle;
  try {
    file = await openForReading(handle);
  } catch (cause) {
    throw cannot('open', cause);
  }
  try {
    // Read errors become IO errors too: callers report a ProfcpuError per library and rethrow anything else.
    return await readElf(
      fileByteSource(file, handle.stat.size, (cause) => cannot('read', cause)),
      label,
    );
  } finally {
    await file.close();
  }
}

/** A ByteSource over bytes already in memory. */
export function bytesSource(bytes: Uint8Array): ByteSource {
  return {
    size: bytes.length,
    read: async (offset, length) => bytes.subarray(offset, Math.min(bytes.length, offset + length)),
  };
}

/** Reads the ELF facts from `source`; `label` names it in errors. */
export async function readElf(source: ByteSource, label: string): Promise<ElfInfo> {
  const file = await ElfFile.open(source, label);
  const header = await readHeader(file);
  const sections = await readSections(file, header);
  const present = (s: Section) => s.type !== sectionTypes.NOBITS && s.size > 0;
  const symtab = sections.find((s) => s.type === sectionTypes.SYMTAB && present(s));
  return {
    bits: file.bits,
    littleEndian: file.le,
    machine: header.machine,
    buildId: await findBuildId(file, header, sections),
    debugLink: await readDebugLink(file, sections),
    // The first symbol of every table is the null symbol: a table of one entry names nothing.
    hasSymtab: symtab !== undefined && symtab.size > Math.max(symtab.entsize, 1),
    hasDebugInfo: sections.some((s) => (s.name === '.debug_info' || s.name === '.zdebug_info') && present(s)),
    hasCode: sections.some((s) => s.name === '.text' && present(s)),
    namingRanges: namingRanges(file, header, sections),
    unwindRanges: sectionRanges(file, sections, unwindSectionNames),
  };
}

/** A section's bytes and where the file places them in its address space. */
export interface SectionContents {
  /** sh_addr: the virtual address of the first byte (0 for a section that is not loaded, as `.debug_frame`). */
  address: number;
  bytes: Uint8Array;
}

/**
 * The contents of the sections of `source` named in `names` that it has with contents (not NOBITS, not empty), each
 * under `maxBytes`: a larger one, or one running past the end of the file, is an ELF_MALFORMED error, as a broken
 * header is. For the readers of one section's format (eh-frame.ts).
 */
export async function readSectionContents(
  source: ByteSource,
  names: readonly string[],
  label: string,
  maxBytes: number,
): Promise<Map<string, SectionContents>> {
  const file = await ElfFile.open(source, label);
  const sections = await readSections(file, await readHeader(file));
  const found = new Map<string, SectionContents>();
  for (const s of sections) {
    if (!names.includes(s.name) || found.has(s.name) || s.type === sectionTypes.NOBITS || s.size === 0) continue;
    if (s.size > maxBytes) throw file.fail(`${s.name} of ${s.size} bytes, more than ${maxBytes}`);
    if (s.addr === undefined) throw file.fail(`${s.name} at an address past 2^53`);
    const v = await file.read(s.offset, s.size, s.name);
    found.set(s.name, { address: s.addr, bytes: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) });
  }
  return found;
}

/** An ELF file being read: its class and byte order, bounded reads, and errors that name it. */
class ElfFile {
  private constructor(
    private readonly source: ByteSource,
    private readonly label: string,
    readonly bits: 32 | 64,
    readonly le: boolean,
  ) {}

  /** Checks the identification bytes and learns the class and byte order. */
  static async open(source: ByteSource, label: string): Promise<ElfFile> {
    const probe = new ElfFile(source, label, 64, true);
    const ident = await probe.read(0, Math.min(64, source.size), 'ELF header');
    if (ident.byteLength < 4 || ident.getUint32(0) !== 0x7f454c46) throw probe.fail('no ELF magic');
    if (ident.byteLength < 52) throw probe.fail('shorter than an ELF header');
    const elfClass = ident.getUint8(4);
    const dataEncoding = ident.getUint8(5);
    if (elfClass !== 1 && elfClass !== 2) throw probe.fail(`unknown ELF class ${elfClass}`);
    if (dataEncoding !== 1 && dataEncoding !== 2) throw probe.fail(`unknown data encoding ${dataEncoding}`);
    if (elfClass === 2 && ident.byteLength < 64) throw probe.fail('shorter than an ELF header');
    return new ElfFile(source, label, elfClass === 2 ? 64 : 32, dataEncoding === 1);
  }

  get size(): number {
    return this.source.size;
  }

  fail(detail: string): ProfcpuError {
    return malformed(this.label, detail);
  }

  /** Exactly `length` bytes at `offset`, which must lie inside the file. */
  async read(offset: number, length: number, what: string): Promise<DataView> {
    if (!Number.isSafeInteger(offset) || offset < 0 || offset + length > this.source.size)
      throw this.fail(
        `${what} lies outside the file (offset ${offset}, ${length} bytes, file size ${this.source.size})`,
      );
    const bytes = await this.source.read(offset, length);
    if (bytes.length < length) throw this.fail(`${what} is truncated`);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  u16(v: DataView, at: number): number {
    return v.getUint16(at, this.le);
  }

  u32(v: DataView, at: number): number {
    return v.getUint32(at, this.le);
  }

  /** A 32- or 64-bit word by the file's class; undefined for a 64-bit value past 2^53. */
  safeWord(v: DataView, at: number): number | undefined {
    if (this.bits === 32) return v.getUint32(at, this.le);
    const value = v.getBigUint64(at, this.le);
    return value > BigInt(Number.MAX_SAFE_INTEGER) ? undefined : Number(value);
  }

  /** A 32- or 64-bit word by the file's class; a 64-bit value past 2^53 is refused. */
  word(v: DataView, at: number): number {
    if (this.bits === 32) return v.getUint32(at, this.le);
    const value = v.getBigUint64(at, this.le);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw this.fail(`value ${value} out of range`);
    return Number(value);
  }
}

interface ElfHeader {
  machine: number;
  phoff: number;
  phentsize: number;
  phnum: number;
  shoff: number;
  shentsize: number;
  shnum: number;
  shstrndx: number;
}

async function readHeader(f: ElfFile): Promise<ElfHeader> {
  const is64 = f.bits === 64;
  const h = await f.read(0, is64 ? 64 : 52, 'ELF header');
  return {
    machine: f.u16(h, 18),
    phoff: f.word(h, is64 ? 32 : 28),
    shoff: f.word(h, is64 ? 40 : 32),
    phentsize: f.u16(h, is64 ? 54 : 42),
    phnum: f.u16(h, is64 ? 56 : 44),
    shentsize: f.u16(h, is64 ? 58 : 46),
    shnum: f.u16(h, is64 ? 60 : 48),
    shstrndx: f.u16(h, is64 ? 62 : 50),
  };
}

/** The section headers with their names; none when the file has no section header table. */
async function readSections(f: ElfFile, header: ElfHeader): Promise<Section[]> {
  const { shoff, shentsize } = header;
  if (shoff === 0) return [];
  const is64 = f.bits === 64;
  const minEntry = is64 ? 64 : 40;
  if (shentsize < minEntry) throw f.fail(`section header entries of ${shentsize} bytes`);
  const readSection = async (index: number): Promise<Omit<Section, 'name'> & { nameOffset: number }> => {
    const v = await f.read(shoff + index * shentsize, minEntry, `section header ${index}`);
    return is64
      ? {
          nameOffset: f.u32(v, 0),
          type: f.u32(v, 4),
          addr: f.safeWord(v, 16),
          offset: f.word(v, 24),
          size: f.word(v, 32),
          align: f.word(v, 48),
          entsize: f.word(v, 56),
        }
      : {
          nameOffset: f.u32(v, 0),
          type: f.u32(v, 4),
          addr: f.u32(v, 12),
          offset: f.u32(v, 16),
          size: f.u32(v, 20),
          align: f.u32(v, 32),
          entsize: f.u32(v, 36),
        };
  };
  let { shnum, shstrndx } = header;
  // More than 0xff00 sections: the real count and name-table index live in section header 0 (ELF gABI).
  if (shnum === 0 || shstrndx === 0xffff) {
    const first = await readSection(0);
    if (shnum === 0) shnum = first.size;
    if (shstrndx === 0xffff) shstrndx = f.u32(await f.read(shoff + (is64 ? 40 : 24), 4, 'sh_link'), 0);
  }
  if (shnum > elfReadLimits.maxSections) throw f.fail(`${shnum} sections, more than ${elfReadLimits.maxSections}`);
  const raw = [];
  for (let i = 0; i < shnum; i++) raw.push(await readSection(i));
  const names = raw[shstrndx];
  let table: Uint8Array = new Uint8Array();
  if (names && names.type !== sectionTypes.NOBITS) {
    if (names.size > elfReadLimits.maxSectionNamesBytes) throw f.fail(`section-name table of ${names.size} bytes`);
    const v = await f.read(names.offset, names.size, 'section-name table');
    table = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  }
  // Names are cut at 64 bytes: the ones looked for are short, and a table without NULs must not make each of
  // 65 536 names a megabyte long.
  return raw.map((s) => ({ ...s, name: cString(table, s.nameOffset, sectionNameBytes) }));
}

/** The build-id note, from the note sections, else (no section headers) from the PT_NOTE segments. */
async function findBuildId(f: ElfFile, header: ElfHeader, sections: Section[]): Promise<string | undefined> {
  for (const s of sections) {
    if (s.type !== sectionTypes.NOTE || s.size === 0) continue;
    const found = await noteBuildId(f, s.offset, s.size, s.align, `note section ${s.name || '?'}`);
    if (found) return found;
  }
  const { phoff, phnum, phentsize } = header;
  if (phoff === 0 || phnum === 0) return undefined;
  const is64 = f.bits === 64;
  const entry = is64 ? 56 : 32;
  if (phentsize < entry) throw f.fail(`program header entries of ${phentsize} bytes`);
  for (let i = 0; i < phnum; i++) {
    const v = await f.read(phoff + i * phentsize, entry, `program header ${i}`);
    if (f.u32(v, 0) !== PT_NOTE) continue;
    const offset = f.word(v, is64 ? 8 : 4);
    const size = f.word(v, is64 ? 32 : 16);
    const align = f.word(v, is64 ? 48 : 28);
    const found = await noteBuildId(f, offset, size, align, `note segment ${i}`);
    if (found) return found;
  }
  return undefined;
}

async function noteBuildId(
  f: ElfFile,
  offset: number,
  size: number,
  align: number,
  what: string,
): Promise<string | undefined> {
  if (size > elfReadLimits.maxNoteBytes) throw f.fail(`${what} of ${size} bytes`);
  const v = await f.read(offset, size, what);
  // 8-byte aligned notes (.note.gnu.property) align the descriptor and the next note, not the name's size.
  const step = align === 8 ? 8 : 4;
  const pad = (n: number) => Math.ceil(n / step) * step;
  for (let at = 0; at + 12 <= size;) {
    const namesz = f.u32(v, at);
    const descsz = f.u32(v, at + 4);
    const type = f.u32(v, at + 8);
    const nameAt = at + 12;
    const descAt = pad(nameAt + namesz);
    if (descAt + descsz > size) throw f.fail(`${what} has a note running past its end`);
    const name = new Uint8Array(v.buffer, v.byteOffset + nameAt, namesz);
    if (type === NT_GNU_BUILD_ID && namesz === 4 && cString(name, 0, 4) === 'GNU') {
      if (descsz === 0) throw f.fail('empty build-id note');
      return Buffer.from(v.buffer, v.byteOffset + descAt, descsz).toString('hex');
    }
    at = pad(descAt + descsz);
  }
  return undefined;
}

/** The `.gnu_debuglink` section: the debug file's name and its CRC32. */
async function readDebugLink(f: ElfFile, sections: Section[]): Promise<ElfInfo['debugLink']> {
  const link = sections.find((s) => s.name === '.gnu_debuglink' && s.type !== sectionTypes.NOBITS && s.size > 0);
  if (!link) return undefined;
  if (link.size > elfReadLimits.maxDebugLinkBytes) throw f.fail(`.gnu_debuglink of ${link.size} bytes`);
  const v = await f.read(link.offset, link.size, '.gnu_debuglink');
  const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  const end = bytes.indexOf(0);
  const crcAt = Math.ceil((end + 1) / 4) * 4;
  if (end <= 0 || crcAt + 4 > link.size) throw f.fail('.gnu_debuglink without a file name and CRC');
  return { file: Buffer.from(bytes.subarray(0, end)).toString('utf8'), crc32: f.u32(v, crcAt) };
}

/** See ElfInfo.namingRanges. */
function namingRanges(f: ElfFile, header: ElfHeader, sections: Section[]): [number, number][] {
  const { phoff, phnum, phentsize, shoff, shentsize } = header;
  const ranges: [number, number][] = [[0, f.bits === 64 ? 64 : 52]];
  if (phoff !== 0 && phnum > 0) ranges.push([phoff, phoff + phnum * phentsize]);
  if (shoff !== 0 && sections.length > 0) ranges.push([shoff, shoff + sections.length * shentsize]);
  for (const s of sections)
    if (
      s.type !== sectionTypes.NOBITS &&
      s.size > 0 &&
      (namingSectionTypes.has(s.type) || namingSectionNames.has(s.name))
    )
      ranges.push([s.offset, Math.min(s.offset + s.size, f.size)]);
  return mergeRanges(ranges.filter(([from, to]) => from < to && from < f.size));
}

const unwindSectionNames = new Set(['.eh_frame', '.eh_frame_hdr', '.debug_frame']);

/** The byte ranges of the sections named in `names` that have contents in the file, sorted and merged. */
function sectionRanges(f: ElfFile, sections: Section[], names: ReadonlySet<string>): [number, number][] {
  const ranges: [number, number][] = [];
  for (const s of sections)
    if (s.type !== sectionTypes.NOBITS && s.size > 0 && names.has(s.name))
      ranges.push([s.offset, Math.min(s.offset + s.size, f.size)]);
  return mergeRanges(ranges.filter(([from, to]) => from < to && from < f.size));
}

/**
 * Section types perf reads to name frames: symbol tables (SYMTAB 2, DYNSYM 11), string tables (3), relocations
 * (RELA 4, REL 9: the PLT's names come from .rela.plt), hash tables (5, GNU_HASH), DYNAMIC (6), notes (7), and the
 * GNU version sections.
 */
const namingSectionTypes = new Set([2, 3, 4, 5, 6, 7, 9, 11, 0x6ffffff6, 0x6ffffffd, 0x6ffffffe, 0x6fffffff]);
/** Sections perf reads by name: the PLT (its entry size and layout), the debug link, MiniDebugInfo. */
const namingSectionNames = new Set(['.plt', '.plt.sec', '.plt.got', '.got.plt', '.gnu_debuglink', '.gnu_debugdata']);

/** Byte ranges sorted and merged where they touch or overlap (sorts `ranges` in place). */
export function mergeRanges(ranges: [number, number][]): [number, number][] {
  const merged: [number, number][] = [];
  for (const [from, to] of ranges.sort((a, b) => a[0] - b[0])) {
    const last = merged[merged.length - 1];
    if (last && from <= last[1]) last[1] = Math.max(last[1], to);
    else merged.push([from, to]);
  }
  return merged;
}

/** Longest section name kept (`.gnu_debuglink`, `.debug_info`, `.text` are what is looked for). */
const sectionNameBytes = 64;

function cString(bytes: Uint8Array, offset: number, maxBytes: number): string {
  if (offset >= bytes.length) return '';
  const limit = Math.min(bytes.length, offset + maxBytes);
  const end = bytes.subarray(offset, limit).indexOf(0);
  return Buffer.from(bytes.subarray(offset, end < 0 ? limit : offset + end)).toString('latin1');
}

/** True when `text` is a build-id as this module prints them: an even number (2 to 128) of lower-case hex digits. */
export function isBuildId(text: string): boolean {
  return /^(?:[0-9a-f]{2}){1,64}$/.test(text);
}

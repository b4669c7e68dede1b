// An ELF file (or any byte source) in, what symbol lookup needs out: the GNU build-id, the `.gnu_debuglink` target,
// and whether the file carries its own `.symtab` and DWARF. Reads only the headers, the section-name table and the
// small sections it needs, each under a size limit, so a truncated or hostile file costs a few kilobytes and ends in
// an ELF_MALFORMED error, never a crash or an unbounded read. A path naming a FIFO, a directory, a device or a socket
// is refused (BAD_INPUT) before anything reads it, so it cannot block or fail in odd ways.
import { constants, type Stats } from 'node:fs';
import { open, stat, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import { openForReading } from '../files/bounded-read.js';
import type { PathHandle } from '../files/rooted.js';

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
   * (holes elsewhere, see src/symbols/kept-binaries.ts) names every frame the whole file names, for a fraction of
   * its bytes: code and data are most of a binary.
   */
  namingRanges: [number, number][];
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

const SHT_SYMTAB = 2;
const SHT_NOTE = 7;
const SHT_NOBITS = 8;
const PT_NOTE = 4;
const NT_GNU_BUILD_ID = 3;

interface Section {
  name: string;
  type: number;
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
  const fail = (detail: string) => malformed(label, detail);
  const readExact = async (offset: number, length: number, what: string): Promise<DataView> => {
    if (!Number.isSafeInteger(offset) || offset < 0 || offset + length > source.size)
      throw fail(`${what} lies outside the file (offset ${offset}, ${length} bytes, file size ${source.size})`);
    const bytes = await source.read(offset, length);
    if (bytes.length < length) throw fail(`${what} is truncated`);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };

  const ident = await readExact(0, Math.min(64, source.size), 'ELF header');
  if (ident.byteLength < 4 || ident.getUint32(0) !== 0x7f454c46) throw fail('no ELF magic');
  if (ident.byteLength < 52) throw fail('shorter than an ELF header');
  const elfClass = ident.getUint8(4);
  const dataEncoding = ident.getUint8(5);
  if (elfClass !== 1 && elfClass !== 2) throw fail(`unknown ELF class ${elfClass}`);
  if (dataEncoding !== 1 && dataEncoding !== 2) throw fail(`unknown data encoding ${dataEncoding}`);
  const bits = elfClass === 2 ? 64 : 32;
  const le = dataEncoding === 1;
  if (bits === 64 && ident.byteLength < 64) throw fail('shorter than an ELF header');
  const u16 = (v: DataView, at: number) => v.getUint16(at, le);
  const u32 = (v: DataView, at: number) => v.getUint32(at, le);
  const word = (v: DataView, at: number): number => {
    if (bits === 32) return v.getUint32(at, le);
    const value = v.getBigUint64(at, le);
    if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw fail(`value ${value} out of range`);
    return Number(value);
  };

  const h = ident;
  const machine = u16(h, 18);
  const phoff = word(h, bits === 64 ? 32 : 28);
  const shoff = word(h, bits === 64 ? 40 : 32);
  const phentsize = u16(h, bits === 64 ? 54 : 42);
  const phnum = u16(h, bits === 64 ? 56 : 44);
  const shentsize = u16(h, bits === 64 ? 58 : 46);
  let shnum = u16(h, bits === 64 ? 60 : 48);
  let shstrndx = u16(h, bits === 64 ? 62 : 50);

  const sections: Section[] = [];
  if (shoff !== 0) {
    const minEntry = bits === 64 ? 64 : 40;
    if (shentsize < minEntry) throw fail(`section header entries of ${shentsize} bytes`);
    const readSection = async (index: number): Promise<Omit<Section, 'name'> & { nameOffset: number }> => {
      const v = await readExact(shoff + index * shentsize, minEntry, `section header ${index}`);
      return bits === 64
        ? {
            nameOffset: u32(v, 0),
            type: u32(v, 4),
            offset: word(v, 24),
            size: word(v, 32),
            align: word(v, 48),
            entsize: word(v, 56),
          }
        : {
            nameOffset: u32(v, 0),
            type: u32(v, 4),
            offset: u32(v, 16),
            size: u32(v, 20),
            align: u32(v, 32),
            entsize: u32(v, 36),
          };
    };
    // More than 0xff00 sections: the real count and name-table index live in section header 0 (ELF gABI).
    if (shnum === 0 || shstrndx === 0xffff) {
      const first = await readSection(0);
      if (shnum === 0) shnum = first.size;
      if (shstrndx === 0xffff) shstrndx = u32(await readExact(shoff + (bits === 64 ? 40 : 24), 4, 'sh_link'), 0);
    }
    if (shnum > elfReadLimits.maxSections) throw fail(`${shnum} sections, more than ${elfReadLimits.maxSections}`);
    const raw = [];
    for (let i = 0; i < shnum; i++) raw.push(await readSection(i));
    const names = raw[shstrndx];
    let table: Uint8Array = new Uint8Array();
    if (names && names.type !== SHT_NOBITS) {
      if (names.size > elfReadLimits.maxSectionNamesBytes) throw fail(`section-name table of ${names.size} bytes`);
      const v = await readExact(names.offset, names.size, 'section-name table');
      table = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    }
    // Names are cut at 64 bytes: the ones looked for are short, and a table without NULs must not make each of
    // 65 536 names a megabyte long.
    for (const s of raw) sections.push({ ...s, name: cString(table, s.nameOffset, sectionNameBytes) });
  }

  const present = (s: Section) => s.type !== SHT_NOBITS && s.size > 0;
  let buildId: string | undefined;
  for (const s of sections) {
    if (s.type !== SHT_NOTE || !present(s) || buildId) continue;
    buildId = await findBuildId(s.offset, s.size, s.align, `note section ${s.name || '?'}`);
  }
  // No section headers (or no note sections among them): the loader's view, PT_NOTE segments.
  if (!buildId && phoff !== 0 && phnum > 0) {
    const entry = bits === 64 ? 56 : 32;
    if (phentsize < entry) throw fail(`program header entries of ${phentsize} bytes`);
    for (let i = 0; i < phnum && !buildId; i++) {
      const v = await readExact(phoff + i * phentsize, entry, `program header ${i}`);
      if (u32(v, 0) !== PT_NOTE) continue;
      const offset = word(v, bits === 64 ? 8 : 4);
      const size = word(v, bits === 64 ? 32 : 16);
      const align = word(v, bits === 64 ? 48 : 28);
      buildId = await findBuildId(offset, size, align, `note segment ${i}`);
    }
  }

  async function findBuildId(offset: number, size: number, align: number, what: string): Promise<string | undefined> {
    if (size > elfReadLimits.maxNoteBytes) throw fail(`${what} of ${size} bytes`);
    const v = await readExact(offset, size, what);
    // 8-byte aligned notes (.note.gnu.property) align the descriptor and the next note, not the name's size.
    const step = align === 8 ? 8 : 4;
    const pad = (n: number) => Math.ceil(n / step) * step;
    for (let at = 0; at + 12 <= size;) {
      const namesz = u32(v, at);
      const descsz = u32(v, at + 4);
      const type = u32(v, at + 8);
      const nameAt = at + 12;
      const descAt = pad(nameAt + namesz);
      if (descAt + descsz > size) throw fail(`${what} has a note running past its end`);
      const name = new Uint8Array(v.buffer, v.byteOffset + nameAt, namesz);
      if (type === NT_GNU_BUILD_ID && namesz === 4 && cString(name, 0, 4) === 'GNU') {
        if (descsz === 0) throw fail('empty build-id note');
        return Buffer.from(v.buffer, v.byteOffset + descAt, descsz).toString('hex');
      }
      at = pad(descAt + descsz);
    }
    return undefined;
  }

  let debugLink: ElfInfo['debugLink'];
  const link = sections.find((s) => s.name === '.gnu_debuglink' && present(s));
  if (link) {
    if (link.size > elfReadLimits.maxDebugLinkBytes) throw fail(`.gnu_debuglink of ${link.size} bytes`);
    const v = await readExact(link.offset, link.size, '.gnu_debuglink');
    const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
    const end = bytes.indexOf(0);
    const crcAt = Math.ceil((end + 1) / 4) * 4;
    if (end <= 0 || crcAt + 4 > link.size) throw fail('.gnu_debuglink without a file name and CRC');
    debugLink = { file: Buffer.from(bytes.subarray(0, end)).toString('utf8'), crc32: u32(v, crcAt) };
  }

  const ranges: [number, number][] = [[0, bits === 64 ? 64 : 52]];
  if (phoff !== 0 && phnum > 0) ranges.push([phoff, phoff + phnum * phentsize]);
  if (shoff !== 0 && shnum > 0) ranges.push([shoff, shoff + shnum * shentsize]);
  for (const s of sections)
    if (present(s) && (namingSectionTypes.has(s.type) || namingSectionNames.has(s.name)))
      ranges.push([s.offset, Math.min(s.offset + s.size, source.size)]);

  const symtab = sections.find((s) => s.type === SHT_SYMTAB && present(s));
  return {
    bits,
    littleEndian: le,
    machine,
    buildId,
    debugLink,
    // The first symbol of every table is the null symbol: a table of one entry names nothing.
    hasSymtab: symtab !== undefined && symtab.size > Math.max(symtab.entsize, 1),
    hasDebugInfo: sections.some((s) => (s.name === '.debug_info' || s.name === '.zdebug_info') && present(s)),
    hasCode: sections.some((s) => s.name === '.text' && present(s)),
    namingRanges: mergeRanges(ranges.filter(([from, to]) => from < to && from < source.size)),
  };
}

/**
 * Section types perf reads to name frames: symbol tables (SYMTAB 2, DYNSYM 11), string tables (3), relocations
 * (RELA 4, REL 9: the PLT's names come from .rela.plt), hash tables (5, GNU_HASH), DYNAMIC (6), notes (7), and the
 * GNU version sections.
 */
const namingSectionTypes = new Set([2, 3, 4, 5, 6, 7, 9, 11, 0x6ffffff6, 0x6ffffffd, 0x6ffffffe, 0x6fffffff]);
/** Sections perf reads by name: the PLT (its entry size and layout), the debug link, MiniDebugInfo. */
const namingSectionNames = new Set(['.plt', '.plt.sec', '.plt.got', '.got.plt', '.gnu_debuglink', '.gnu_debugdata']);

function mergeRanges(ranges: [number, number][]): [number, number][] {
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

// A PE file's bytes in (a .NET assembly, read whole from the target), its sections and data directories out, and the
// bounds-checked reads the ReadyToRun and metadata readers build on. The file is the target's, so every offset and
// count in it is untrusted: each read checks its range and fails with a PeFormatError, never reads past the buffer
// and never allocates more than the buffer holds.

import { ProfcpuError } from '../../error.js';

/** Thrown for a damaged or hostile image; the message says what was wrong and where. */
export class PeFormatError extends ProfcpuError {
  constructor(detail: string) {
    super('BAD_INPUT', `not a usable .NET image (${detail})`);
  }
}

/** Little-endian reads within a buffer, each checked against its end. */
export class ByteReader {
  constructor(readonly bytes: Buffer) {}

  get length(): number {
    return this.bytes.length;
  }

  check(offset: number, size: number, what: string): void {
    if (!Number.isInteger(offset) || offset < 0 || size < 0 || offset + size > this.bytes.length)
      throw new PeFormatError(`${what} at ${offset} (+${size}) lies outside the ${this.bytes.length}-byte file`);
  }

  u8(offset: number, what = 'byte'): number {
    this.check(offset, 1, what);
    return this.bytes[offset]!;
  }

  u16(offset: number, what = 'u16'): number {
    this.check(offset, 2, what);
    return this.bytes.readUInt16LE(offset);
  }

  u32(offset: number, what = 'u32'): number {
    this.check(offset, 4, what);
    return this.bytes.readUInt32LE(offset);
  }

  slice(offset: number, size: number, what: string): Buffer {
    this.check(offset, size, what);
    return this.bytes.subarray(offset, offset + size);
  }

  /** A NUL-terminated string of at most `max` bytes (cut there when it has no NUL). */
  cString(offset: number, max: number, what: string): string {
    this.check(offset, 0, what);
    const end = Math.min(this.bytes.length, offset + max);
    let stop = this.bytes.indexOf(0, offset);
    if (stop < 0 || stop > end) stop = end;
    return this.bytes.toString('utf8', offset, stop);
  }
}

export interface PeSection {
  name: string;
  virtualAddress: number;
  virtualSize: number;
  rawOffset: number;
  rawSize: number;
}

export interface DataDirectory {
  rva: number;
  size: number;
}

export interface PeImage {
  reader: ByteReader;
  /** COFF machine with the OS override folded out (0x8664 for x64, 0xaa64 for arm64). */
  machine: number;
  sections: PeSection[];
  /** The CLI (COR20) header's directory, index 14, when the image has one. */
  cliHeader: DataDirectory | undefined;
}

/** IMAGE_FILE_MACHINE_NATIVE_OS_OVERRIDE values crossgen2 XORs into the machine field (Linux, macOS, FreeBSD, NetBSD, SunOS). */
const osOverrides = [0x7b79, 0x4644, 0xadc4, 0x1993, 0x1992];
const knownMachines = new Set([0x8664, 0xaa64, 0x014c, 0x01c4, 0x6264, 0x5064]);

export const machineAmd64 = 0x8664;

/** Parses the headers of a PE file. */
export function readPeImage(bytes: Buffer): PeImage {
  const r = new ByteReader(bytes);
  if (r.length < 64 || r.u16(0) !== 0x5a4d) throw new PeFormatError('no MZ header');
  const pe = r.u32(0x3c, 'e_lfanew');
  if (r.u32(pe, 'PE signature') !== 0x00004550) throw new PeFormatError('no PE signature');
  const coff = pe + 4;
  let machine = r.u16(coff, 'machine');
  if (!knownMachines.has(machine)) {
    const folded = osOverrides.map((o) => machine ^ o).find((m) => knownMachines.has(m));
    if (folded !== undefined) machine = folded;
  }
  const sectionCount = r.u16(coff + 2, 'section count');
  const optionalSize = r.u16(coff + 16, 'optional header size');
  const optional = coff + 20;
  const magic = r.u16(optional, 'optional header magic');
  if (magic !== 0x10b && magic !== 0x20b) throw new PeFormatError(`optional header magic ${magic.toString(16)}`);
  const directoriesAt = optional + (magic === 0x20b ? 112 : 96);
  const directoryCount = r.u32(directoriesAt - 4, 'directory count');
  let cliHeader: DataDirectory | undefined;
  if (directoryCount > 14 && directoriesAt + 15 * 8 <= optional + optionalSize) {
    const rva = r.u32(directoriesAt + 14 * 8);
    const size = r.u32(directoriesAt + 14 * 8 + 4);
    if (rva !== 0 && size !== 0) cliHeader = { rva, size };
  }
  const sectionsAt = optional + optionalSize;
  r.check(sectionsAt, sectionCount * 40, 'section table');
  const sections: PeSection[] = [];
  for (let i = 0; i < sectionCount; i++) {
    const at = sectionsAt + i * 40;
    sections.push({
      name: r.cString(at, 8, 'section name'),
      virtualSize: r.u32(at + 8),
      virtualAddress: r.u32(at + 12),
      rawSize: r.u32(at + 16),
      rawOffset: r.u32(at + 20),
    });
  }
  return { reader: r, machine, sections, cliHeader };
}

/** The file offset of an RVA, or undefined when no section's raw data holds it. */
export function rvaToOffset(image: PeImage, rva: number): number | undefined {
  for (const s of image.sections) {
    if (rva >= s.virtualAddress && rva < s.virtualAddress + Math.min(s.rawSize, s.virtualSize || s.rawSize))
      return rva - s.virtualAddress + s.rawOffset;
  }
  // Headers are mapped at RVA 0 = file offset 0.
  const first = Math.min(...image.sections.map((s) => s.rawOffset).filter((o) => o > 0), image.reader.length);
  return rva < first ? rva : undefined;
}

/**
 * The RVA of file offset `offset` (what perf prints for a frame in an image's mapping), or undefined when no
 * section's raw data that is also mapped (the shorter of raw and virtual size) holds it.
 */
export function fileOffsetToRva(sections: readonly PeSection[], offset: number): number | undefined {
  for (const s of sections) {
    if (offset >= s.rawOffset && offset < s.rawOffset + Math.min(s.rawSize, s.virtualSize || s.rawSize))
      return offset - s.rawOffset + s.virtualAddress;
  }
  return undefined;
}

/** Bytes at an RVA, checked against both the section and the file. */
export function bytesAtRva(image: PeImage, rva: number, size: number, what: string): Buffer {
  const offset = rvaToOffset(image, rva);
  if (offset === undefined) throw new PeFormatError(`${what}: RVA ${rva.toString(16)} is in no section`);
  return image.reader.slice(offset, size, what);
}

/** The file offset of an RVA, failing when it is in no section. */
export function offsetOfRva(image: PeImage, rva: number, what: string): number {
  const offset = rvaToOffset(image, rva);
  if (offset === undefined) throw new PeFormatError(`${what}: RVA ${rva.toString(16)} is in no section`);
  return offset;
}

export interface CliHeader {
  metadata: DataDirectory;
  flags: number;
  managedNativeHeader: DataDirectory;
}

/**
 * The COR20 header: where the metadata and the ReadyToRun header are. `rva` reads another one than the image's own
 * (a composite image's embedded component).
 */
export function readCliHeader(image: PeImage, rva = image.cliHeader?.rva): CliHeader {
  if (rva === undefined) throw new PeFormatError('no CLI header: not a .NET assembly');
  const at = offsetOfRva(image, rva, 'CLI header');
  const r = image.reader;
  r.check(at, 72, 'CLI header');
  return {
    metadata: { rva: r.u32(at + 8), size: r.u32(at + 12) },
    flags: r.u32(at + 16),
    managedNativeHeader: { rva: r.u32(at + 64), size: r.u32(at + 68) },
  };
}

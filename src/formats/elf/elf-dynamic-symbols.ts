// The values of a few named dynamic symbols (`.dynsym`) of a 64-bit little-endian ELF file: what profcpu needs to
// find data a library exports for out-of-process readers (libcoreclr.so's `DotNetRuntimeContractDescriptor`,
// `g_dacTable`). Reads the section headers and the two tables only, each under a size cap; a file that does not fit
// is an ELF_MALFORMED error (elf.ts's rules), never a long or unbounded read.
import { ProfcpuError } from '../../error.js';
import type { ByteSource } from './elf.js';

export const dynamicSymbolLimits = Object.freeze({
  maxSections: 65_536,
  /** Largest `.dynsym` or `.dynstr` read (libcoreclr.so's are about 8 KiB). */
  maxTableBytes: 16 << 20,
});

const SHT_DYNSYM = 11;
const symbolBytes = 24;

/** The value (st_value) of each of `names` that the file defines; undefined names are left out. */
export async function readDynamicSymbols(
  source: ByteSource,
  names: readonly string[],
  label: string,
): Promise<Map<string, bigint>> {
  const fail = (detail: string) =>
    new ProfcpuError('ELF_MALFORMED', `${label}: not a usable ELF file (${detail})`, {
      remedy: 'Check that the path names a complete 64-bit ELF library.',
    });
  const read = async (offset: number, length: number, what: string): Promise<DataView> => {
    if (!Number.isSafeInteger(offset) || offset < 0 || length < 0 || offset + length > source.size)
      throw fail(`${what} lies outside the file`);
    const bytes = await source.read(offset, length);
    if (bytes.length < length) throw fail(`${what} is truncated`);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
  const header = await read(0, 64, 'ELF header');
  if (header.getUint32(0) !== 0x7f454c46) throw fail('no ELF magic');
  if (header.getUint8(4) !== 2 || header.getUint8(5) !== 1) throw fail('not 64-bit little-endian');
  const shoff = safe(header.getBigUint64(40, true), fail);
  const shentsize = header.getUint16(58, true);
  const shnum = header.getUint16(60, true);
  if (shoff === 0 || shnum === 0) throw fail('no section headers');
  if (shentsize < 64) throw fail(`section header entries of ${shentsize} bytes`);
  if (shnum > dynamicSymbolLimits.maxSections) throw fail(`${shnum} sections`);
  if (shnum * shentsize > dynamicSymbolLimits.maxTableBytes)
    throw fail(`section headers of ${shnum * shentsize} bytes`);
  const table = await read(shoff, shnum * shentsize, 'section headers');
  const section = (i: number) => ({
    type: table.getUint32(i * shentsize + 4, true),
    offset: safe(table.getBigUint64(i * shentsize + 24, true), fail),
    size: safe(table.getBigUint64(i * shentsize + 32, true), fail),
    link: table.getUint32(i * shentsize + 40, true),
  });
  let dynsym: ReturnType<typeof section> | undefined;
  for (let i = 0; i < shnum && !dynsym; i++) if (section(i).type === SHT_DYNSYM) dynsym = section(i);
  if (!dynsym) return new Map();
  if (dynsym.link >= shnum) throw fail('.dynsym links to no string table');
  const strtab = section(dynsym.link);
  for (const [what, size] of [
    ['.dynsym', dynsym.size],
    ['.dynstr', strtab.size],
  ] as const)
    if (size > dynamicSymbolLimits.maxTableBytes) throw fail(`${what} of ${size} bytes`);
  const symbols = await read(dynsym.offset, dynsym.size - (dynsym.size % symbolBytes), '.dynsym');
  const strings = await read(strtab.offset, strtab.size, '.dynstr');
  const stringBytes = new Uint8Array(strings.buffer, strings.byteOffset, strings.byteLength);
  const wanted = new Map(names.map((n) => [n, Buffer.from(`${n}\0`, 'latin1')] as const));
  const found = new Map<string, bigint>();
  for (let at = 0; at + symbolBytes <= symbols.byteLength; at += symbolBytes) {
    const nameOffset = symbols.getUint32(at, true);
    const shndx = symbols.getUint16(at + 6, true);
    if (shndx === 0) continue; // undefined: imported from another library
    for (const [name, bytes] of wanted) {
      if (nameOffset + bytes.length > stringBytes.length) continue;
      if (Buffer.compare(stringBytes.subarray(nameOffset, nameOffset + bytes.length), bytes) !== 0) continue;
      found.set(name, symbols.getBigUint64(at + 8, true));
    }
  }
  return found;
}

function safe(value: bigint, fail: (detail: string) => Error): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw fail(`value ${value} out of range`);
  return Number(value);
}

// jit-PID.dump bytes in (the copy collect took of a .NET process's /tmp/jit-<nspid>.dump), code ranges with names out.
// The format is perf's jitdump (tools/perf/Documentation/jitdump-specification.txt) as the .NET runtime writes it
// (src/coreclr/pal/src/misc/perfjitdump.cpp): a 40-byte file header, then records of `id, total_size, timestamp`,
// of which .NET only writes JIT_CODE_LOAD. It is the only file that names ReadyToRun (precompiled) methods.
// Tolerant: the runtime may still be writing the last record, and it abandons the file in the middle of a record when
// copying a method's code bytes fails; a record whose fixed part and name are complete is used even when its code
// bytes are missing. Pure: the caller reads the file.

import { isAscii } from 'node:buffer';
import { ProfcpuError } from '../../error.js';
import { SymbolTable } from './symbol-table.js';
import type { CodeSymbol } from './symbol-table.js';

export const jitDumpMagic = 0x4a695444;
const swappedMagic = 0x4454694a;
const fileHeaderSize = 40;
const recordHeaderSize = 16;
/** Record header, then pid, tid (u32) and vma, code_addr, code_size, code_index (u64), then the name. */
const codeLoadFixedSize = recordHeaderSize + 8 + 32;
const jitCodeLoad = 0;

export interface JitDumpHeader {
  version: number;
  /** ELF e_machine of the writer (62 = x86-64, 183 = AArch64). */
  elfMachine: number;
  /** The writer's PID, in its own PID namespace. */
  pid: number;
  /** CLOCK_MONOTONIC nanoseconds when the file was started. */
  timestamp: bigint;
}

export interface JitDumpSymbol extends CodeSymbol {
  /** CLOCK_MONOTONIC nanoseconds when the code was logged. */
  timestamp: bigint;
  /** The runtime's running count of logged methods. */
  codeIndex: bigint;
}

export interface ParseJitDumpResult {
  header: JitDumpHeader;
  /** JIT_CODE_LOAD records in file order: when ranges overlap, the later one is the newer code. */
  symbols: JitDumpSymbol[];
  /** Records of other kinds (JIT_CODE_MOVE, DEBUG_INFO, UNWINDING_INFO, CLOSE), which .NET does not write. */
  otherRecords: number;
  /** Records that could not be read (a size too small to hold them, a name without its NUL, a code size of 0). */
  skipped: number;
  /** True when the data ends inside a record: its name was used when complete, the rest was not there. */
  truncated: boolean;
}

/** What a walk over the records finds besides the symbols. */
type JitDumpCounts = Omit<ParseJitDumpResult, 'symbols'>;

/** ParseJitDumpResult with the entries in columns (and without their timestamps and code indices). */
export interface ReadJitDumpResult extends JitDumpCounts {
  symbols: SymbolTable;
}

/** Parses a whole jitdump file. Throws BAD_INPUT when it is not one (too short, wrong magic, big-endian writer). */
export function parseJitDump(data: Uint8Array, source = 'jitdump'): ParseJitDumpResult {
  const symbols: JitDumpSymbol[] = [];
  const counts = walk(data, source, (view, offset, name, ascii) => {
    symbols.push({
      start: view.getBigUint64(offset + 32, true),
      size: view.getBigUint64(offset + 40, true),
      name: ascii ? latin1(data, name.start, name.end) : decoder.decode(data.subarray(name.start, name.end)),
      timestamp: view.getBigUint64(offset + 8, true),
      codeIndex: view.getBigUint64(offset + 48, true),
    });
  });
  return { ...counts, symbols };
}

/**
 * parseJitDump for big files: the entries go into a SymbolTable whose ASCII names stay slices of `data` (copy those
 * you keep with SymbolTable.appendMissing, and `data`, code bytes and all, can be let go).
 */
export function readJitDump(data: Uint8Array, source = 'jitdump'): ReadJitDumpResult {
  const symbols = new SymbolTable(1024);
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  const chunk = symbols.addChunk(bytes);
  const counts = walk(data, source, (view, offset, name, ascii) => {
    if (ascii) {
      const startHi = view.getUint32(offset + 36, true);
      const sizeHi = view.getUint32(offset + 44, true);
      const startLo = view.getUint32(offset + 32, true);
      const sizeLo = view.getUint32(offset + 40, true);
      symbols.add(startHi, startLo, sizeHi, sizeLo, chunk, name.start, name.end - name.start);
    } else {
      const text = decoder.decode(data.subarray(name.start, name.end));
      symbols.addString(view.getBigUint64(offset + 32, true), view.getBigUint64(offset + 40, true), text);
    }
  });
  return { ...counts, symbols };
}

/** A JIT_CODE_LOAD record at `offset` whose name is bytes [name.start, name.end), all ASCII or not. */
type CodeLoadVisitor = (view: DataView, offset: number, name: { start: number; end: number }, ascii: boolean) => void;

/** Walks the records, handing each usable JIT_CODE_LOAD to `visit`; returns everything but the symbols. */
function walk(data: Uint8Array, source: string, visit: CodeLoadVisitor): JitDumpCounts {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data.byteLength < fileHeaderSize) {
    throw new ProfcpuError('BAD_INPUT', `${source}: ${data.byteLength} bytes, too short for a jitdump header`, {
      remedy: 'The copy was taken before the runtime wrote the file: collect again, it is re-read at the end.',
    });
  }
  const magic = view.getUint32(0, true);
  if (magic !== jitDumpMagic) {
    throw new ProfcpuError(
      'BAD_INPUT',
      magic === swappedMagic
        ? `${source}: a big-endian jitdump, which profcpu does not read`
        : `${source}: not a jitdump (magic 0x${magic.toString(16)})`,
      {
        remedy: 'Point profcpu at the jit-<pid>.dump file written by the .NET runtime (DOTNET_PerfMapEnabled=1 or 2).',
      },
    );
  }
  const headerSize = view.getUint32(8, true);
  const result: JitDumpCounts = {
    header: {
      version: view.getUint32(4, true),
      elfMachine: view.getUint32(12, true),
      pid: view.getUint32(20, true),
      timestamp: view.getBigUint64(24, true),
    },
    otherRecords: 0,
    skipped: 0,
    truncated: false,
  };
  const name = { start: 0, end: 0 };
  // The header's own size field lets a newer writer add fields; never trust it to be smaller than what we read.
  let offset = Math.max(headerSize, fileHeaderSize);
  while (offset < data.byteLength) {
    if (offset + recordHeaderSize > data.byteLength) {
      result.truncated = true;
      break;
    }
    const id = view.getUint32(offset, true);
    const totalSize = view.getUint32(offset + 4, true);
    if (totalSize < recordHeaderSize) {
      // Nothing after a record with a bogus size can be located: stop here.
      result.skipped++;
      break;
    }
    const end = offset + totalSize;
    if (end > data.byteLength) result.truncated = true;
    if (id !== jitCodeLoad) result.otherRecords++;
    else {
      const ascii = readCodeLoad(bytes, view, offset, Math.min(end, data.byteLength), result, name);
      if (ascii !== undefined) visit(view, offset, name, ascii);
    }
    offset = end;
  }
  return result;
}

/**
 * Checks the JIT_CODE_LOAD record at `offset` and finds its name: undefined when it is not usable (counted in
 * `result` when it is broken rather than cut short), else whether the name is ASCII.
 */
function readCodeLoad(
  bytes: Buffer,
  view: DataView,
  offset: number,
  end: number,
  result: JitDumpCounts,
  name: { start: number; end: number },
): boolean | undefined {
  if (offset + codeLoadFixedSize > end) {
    if (end - offset < view.getUint32(offset + 4, true)) return undefined; // cut short by the end of the data
    result.skipped++;
    return undefined;
  }
  const nameStart = offset + codeLoadFixedSize;
  let nul = bytes.indexOf(0, nameStart);
  if (nul < 0 || nul > end) nul = end;
  if (nul === end) {
    if (end === bytes.byteLength) return undefined; // the name itself was cut short
    result.skipped++;
    return undefined;
  }
  if (view.getUint32(offset + 40, true) === 0 && view.getUint32(offset + 44, true) === 0) {
    result.skipped++;
    return undefined;
  }
  name.start = nameStart;
  name.end = nul;
  return isAscii(bytes.subarray(nameStart, nul));
}

/** Bytes known to be ASCII as a string. */
function latin1(data: Uint8Array, start: number, end: number): string {
  return Buffer.from(data.buffer, data.byteOffset + start, end - start).toString('latin1');
}

const decoder = new TextDecoder('utf-8');

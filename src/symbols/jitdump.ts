// jit-PID.dump bytes in (the copy collect took of a .NET process's /tmp/jit-<nspid>.dump), code ranges with names out.
// The format is perf's jitdump (tools/perf/Documentation/jitdump-specification.txt) as the .NET runtime writes it
// (src/coreclr/pal/src/misc/perfjitdump.cpp): a 40-byte file header, then records of `id, total_size, timestamp`,
// of which .NET only writes JIT_CODE_LOAD. It is the only file that names ReadyToRun (precompiled) methods.
// Tolerant: the runtime may still be writing the last record, and it abandons the file in the middle of a record when
// copying a method's code bytes fails; a record whose fixed part and name are complete is used even when its code
// bytes are missing. Pure: the caller reads the file.

import { ProfcpuError } from '../error.js';
import type { CodeSymbol } from './perfmap.js';

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

/** Parses a whole jitdump file. Throws BAD_INPUT when it is not one (too short, wrong magic, big-endian writer). */
export function parseJitDump(data: Uint8Array, source = 'jitdump'): ParseJitDumpResult {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
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
  const result: ParseJitDumpResult = {
    header: {
      version: view.getUint32(4, true),
      elfMachine: view.getUint32(12, true),
      pid: view.getUint32(20, true),
      timestamp: view.getBigUint64(24, true),
    },
    symbols: [],
    otherRecords: 0,
    skipped: 0,
    truncated: false,
  };
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
    if (id === jitCodeLoad) readCodeLoad(data, view, offset, Math.min(end, data.byteLength), result);
    else result.otherRecords++;
    offset = end;
  }
  return result;
}

function readCodeLoad(data: Uint8Array, view: DataView, offset: number, end: number, result: ParseJitDumpResult): void {
  if (offset + codeLoadFixedSize > end) {
    if (end - offset < view.getUint32(offset + 4, true)) return; // cut short by the end of the data: not an error
    result.skipped++;
    return;
  }
  const nameStart = offset + codeLoadFixedSize;
  const nameLength = data.subarray(nameStart, end).indexOf(0);
  if (nameLength < 0) {
    if (end === data.byteLength) return; // the name itself was cut short
    result.skipped++;
    return;
  }
  const size = view.getBigUint64(offset + 40, true);
  if (size === 0n) {
    result.skipped++;
    return;
  }
  result.symbols.push({
    start: view.getBigUint64(offset + 32, true),
    size,
    name: decoder.decode(data.subarray(nameStart, nameStart + nameLength)),
    timestamp: view.getBigUint64(offset + 8, true),
    codeIndex: view.getBigUint64(offset + 48, true),
  });
}

const decoder = new TextDecoder('utf-8');

// Which engine reads a recording. The built-in engine writes what perf script writes for what it reads; a recording
// that holds what it does not read the way perf does goes to perf script instead, with one line saying why, or, with
// no perf here (or `--engine native` asked for), stops with the reason and what to do: never a different flame graph
// without a word. Takes perf.data's outline (its attributes and first records: reader.ts's inspectPerfData), gives the
// reason, if any. The reasons, each checked against perf's own code (tools/perf/builtin-script.c,
// util/session.c):
// - DWARF call graphs (PERF_SAMPLE_REGS_USER and STACK_USER in any event: perf script then unwinds every sample's
//   stack copy with libdw or libunwind; the recorded callchain holds only the kernel's frames) of a machine other than
//   x86-64: the built-in engine unwinds x86-64's itself (unwind/sample-unwind.ts), and says where it goes past perf;
//   a recording that names no machine (no HEADER_ARCH: perf was killed before writing it) is taken for one of this
//   machine's, as perf takes it (perf_env__arch falls back to uname);
// - LBR call graphs (branch_sample_type CALL_STACK: perf stitches the call stack from the branch records);
// - hardware trace (AUXTRACE_INFO: perf script makes its samples from the trace);
// - zstd data compressed at a level whose window profcpu does not decode (compressed.ts).
import type { PerfDataOutline } from './perf-data/reader.js';
import { branchCallStack, sampleBit } from './perf-data/format.js';

export type Engine = 'perf' | 'native';

/** What the built-in engine does not read the way perf does in a recording. */
export interface Shortfall {
  /** In words, for the hand-over line and the manifest. */
  why: string;
  /** How to record so that the built-in engine reads it, when there is a way. */
  recordInstead?: string;
}

/** This machine's architecture as perf names it (uname -m). */
function thisMachine(): string {
  return process.arch === 'x64' ? 'x86_64' : process.arch === 'arm64' ? 'aarch64' : process.arch;
}

/** What the built-in engine cannot read the way perf does in this recording, or undefined. */
export function builtinShortfall(outline: PerfDataOutline): Shortfall | undefined {
  const { attrs } = outline.header;
  const combined = attrs.reduce((bits, attr) => bits | attr.sampleType, 0n);
  const framePointers = 'record with frame-pointer call graphs (-g), which it reads';
  const named = outline.header.features.arch;
  const arch = named ?? thisMachine();
  if (combined & sampleBit.regsUser && combined & sampleBit.stackUser && arch !== 'x86_64')
    return {
      why:
        'perf.data holds DWARF call graphs (perf record --call-graph dwarf) of ' +
        (named ? `an ${arch} machine` : `a machine it does not name, taken for this one as perf does (${arch})`) +
        ', which the built-in engine does not unwind (it unwinds x86_64’s)',
      recordInstead: framePointers,
    };
  if (attrs.some((attr) => attr.branchSampleType & branchCallStack))
    return {
      why: 'perf.data holds LBR call graphs (perf record --call-graph lbr), which the built-in engine does not stitch',
      recordInstead: framePointers,
    };
  if (outline.auxtrace)
    return {
      why:
        'perf.data holds hardware trace data (Intel PT, CoreSight...), from which perf script makes its samples; the ' +
        'built-in engine does not decode it',
    };
  if (outline.compressedError?.tooLargeWindow)
    return {
      why:
        'perf.data was compressed by perf record -z at a zstd level above 7 ' +
        `(${outline.compressedError.message}), which the built-in engine does not decompress`,
      recordInstead: 'record with -z at level 1 to 7 (-z alone is level 1), or without -z',
    };
  return undefined;
}

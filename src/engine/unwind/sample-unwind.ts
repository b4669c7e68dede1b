// The user frames of one DWARF-mode sample (`perf record --call-graph dwarf`) as the built-in engine gives them:
// unwound by CFI where a file has it (cfi-unwind.ts), and by frame pointers through .NET's code, which has none: its
// JIT-compiled code (anonymous or memfd:doublemapper memory), its ReadyToRun images (PE files, not ELF) and its
// stubs, which all keep frame pointers. perf's own DWARF unwinding stops in .NET's code, so past it these frames are
// more than perf script gives: every sample that took such a step is counted (UnwindTally.framePointerSamples) for the
// manifest and the line that says so. Other code no FDE covers (libcoreclr.so's assembly helpers, which keep frame
// pointers too; memory made executable after perf recorded its mapping) is stepped by frame pointer as libunwind,
// perf's unwinder, falls back to it, and not counted.
//
// A file's CFI is loaded on first need (a promise): the walk is then run again once it is there, from the start, as
// the walk is a pure function of the sample and the rows; each run loads at least one more file, so a sample costs at
// most one run per distinct file its frames are in (127 at most); a source whose promise settles without the rows
// being there the next time cannot make it run more than that.
import type { UnwindRow } from '../../formats/elf/eh-frame.js';
import type { UserRegs } from '../perf-data/records.js';
import { unwindUserStack, type UnwindStop } from './cfi-unwind.js';

/** Where the rows come from, by absolute address in the sample's process. */
export interface RowSource {
  /** The CFI row at `pc`; a promise while its file's CFI loads. */
  rowAt(pc: bigint): UnwindRow | undefined | Promise<unknown>;
  /**
   * How the code at `pc`, which has no CFI row, is stepped: `dotnet`, .NET's code, by frame pointer (counted);
   * `fallback`, other code, by frame pointer as libunwind falls back; false: not now (its file's CFI is loading).
   */
  framePointers(pc: bigint): 'dotnet' | 'fallback' | false;
}

export interface SampleUnwinding {
  /** The user frames, as perf gives them: the sampled ip, then each caller's return address minus 1. */
  frames: bigint[];
  stop: UnwindStop;
  /** Frames stepped by frame pointer (.NET's code, which has no CFI). */
  framePointerSteps: number;
}

/** What the unwinding of a recording's samples came to. */
export interface UnwindTally {
  /** Samples whose user frames were unwound from their stack snapshot. */
  samples: number;
  /** Of those, the ones stepped through .NET's code (no CFI) by frame pointers, where perf's DWARF unwinding stops. */
  framePointerSamples: number;
  /** Why each walk stopped (`end`: at the thread's start). */
  stops: Partial<Record<UnwindStop, number>>;
}

export function emptyTally(): UnwindTally {
  return { samples: 0, framePointerSamples: 0, stops: {} };
}

export function countUnwinding(tally: UnwindTally, result: SampleUnwinding): void {
  tally.samples++;
  if (result.framePointerSteps > 0) tally.framePointerSamples++;
  tally.stops[result.stop] = (tally.stops[result.stop] ?? 0) + 1;
}

/** Marks a walk cut short for a file's CFI still loading. */
class Loading {
  constructor(readonly wait: Promise<unknown>) {}
}

/** Runs of one sample's walk at most: one per file loaded, one more for the walk after the last. */
const maxRuns = 128;

/** The user frames of a sample with registers `regs` and stack snapshot `stack`, rows from `rows`. */
export function unwindSample(
  regs: UserRegs,
  stack: Uint8Array,
  rows: RowSource,
): SampleUnwinding | Promise<SampleUnwinding> {
  let framePointerSteps = 0;
  let runs = 0;
  const walk = (): SampleUnwinding | Loading => {
    framePointerSteps = 0;
    runs++;
    let loading: Loading | undefined;
    const result = unwindUserStack(regs, stack, {
      rowAt(pc) {
        if (loading) return undefined;
        const row = rows.rowAt(pc);
        if (row instanceof Promise) {
          // The last run walks with what is there: a file still loading has no rows in it.
          if (runs < maxRuns) loading = new Loading(row);
          else row.catch(() => undefined);
          return undefined;
        }
        return row;
      },
      framePointers(pc) {
        if (loading) return false;
        const how = rows.framePointers(pc);
        if (how === 'dotnet') framePointerSteps++;
        return how !== false;
      },
    });
    return loading ?? { ...result, framePointerSteps };
  };
  const run = (): SampleUnwinding | Promise<SampleUnwinding> => {
    const result = walk();
    return result instanceof Loading ? result.wait.then(run, run) : result;
  };
  return run();
}

// The .NET runtime's stubs by kind, as a collect step: finds libcoreclr.so among the target's mappings, reads the
// address of its exported data descriptor (.NET 10; `g_dacTable` for 8 and 9, whose layout the runtime's version
// picks) from the file (through the target's root: TargetFiles), reads the descriptor and walks the runtime's range
// section map in the target's memory (runtime-stubs.ts: read-only, every read bounded, one byte budget and deadline
// per pass), and writes the table to the folder (runtime-stubs-store.ts), so postprocess names frames in stubs the
// perf map never logged, with nothing set in the target. Before recording (a recording cut short by the target's end
// still has a table) and after (stubs made meanwhile), the second table holding both. The report says what was read,
// how much and how long it took, or why nothing was.
import { layout } from '../../output/layout.js';
import type { CollectStep, StepContext, StepReport } from '../../step/step.js';
import { isProfcpuError } from '../../error.js';
import { openForReading, withDeadline } from '../../files/bounded-read.js';
import { OutputFolder } from '../../files/output-folder.js';
import { fileByteSource } from '../../formats/elf/elf.js';
import { readDynamicSymbols } from '../../formats/elf/elf-dynamic-symbols.js';
import { writeRuntimeStubTable } from './runtime-stubs-store.js';
import { parseProcMaps } from '../../target/proc-maps.js';
import { readProcText, readStat } from '../../target/procfs.js';
import { MemoryBudget, ProcMemory, type MemoryLimits, type ProcessMemory } from '../../target/process-memory.js';
import type { TargetFiles } from '../../target/target-files.js';
import { readContractDescriptor } from './contract-descriptor.js';
import { dacTableDescriptor, dacTableMajors } from './dac-table-layout.js';
import { mergeRanges, walkRuntimeStubs, type StubRange, type StubWalkResult } from './runtime-stubs.js';

export interface RuntimeStubsStepOptions {
  /** Bounds on the memory read in one pass (64 MiB, 10 s by default: the fixture app needs about 100 KiB). */
  memory: Partial<MemoryLimits>;
}

const descriptorSymbol = 'DotNetRuntimeContractDescriptor';
const dacTableSymbol = 'g_dacTable';

/** Where the runtime and its descriptor are in the target, or why not. */
interface RuntimeLocation {
  library: string;
  version: string | undefined;
  descriptor: bigint | undefined;
  dacTable: bigint | undefined;
}

/** Finds libcoreclr.so in `mapsText` and the addresses of its exported descriptors; undefined when not .NET. */
export async function locateRuntime(files: TargetFiles, mapsText: string): Promise<RuntimeLocation | undefined> {
  const first = parseProcMaps(mapsText).mappings.find((m) => m.offset === 0n && /\/libcoreclr\.so$/.test(m.path));
  if (!first) return undefined;
  const handle = await files.lookup(first.path, 'file');
  let symbols: Map<string, bigint>;
  try {
    const file = await openForReading(handle);
    try {
      symbols = await readDynamicSymbols(
        fileByteSource(file, handle.stat.size, (cause) => cause as Error),
        [descriptorSymbol, dacTableSymbol],
        first.path,
      );
    } finally {
      await file.close();
    }
  } finally {
    await handle.close();
  }
  // A shared library's first segment is linked at 0: the mapping of its first page is the load bias.
  const at = (name: string) => {
    const value = symbols.get(name);
    return value === undefined ? undefined : first.start + value;
  };
  return {
    library: first.path,
    version: /\/(\d+\.\d+\.\d+[\w.-]*)\/libcoreclr\.so$/.exec(first.path)?.[1],
    descriptor: at(descriptorSymbol),
    dacTable: at(dacTableSymbol),
  };
}

/**
 * The runtime's copy of its write barriers. With W^X on (the default) the runtime copies the barrier code out of
 * libcoreclr.so into executable memory of its own (so that it can patch it), as the very first thing its executable
 * allocator places: the executable view of the double mapping's offset 0, starting with the `ret` of
 * JIT_PatchedCodeStart (checked on .NET 10.0.12 against the runtime's perf map, which logs it as
 * JIT_CopiedWriteBarriers). The runtime keeps no record of it that the descriptor reaches, hence this check.
 */
async function findWriteBarrierCopy(memory: ProcessMemory, mapsText: string): Promise<StubRange | undefined> {
  const copy = parseProcMaps(mapsText).mappings.find(
    (m) => m.offset === 0n && m.perms.startsWith('r-x') && m.path.startsWith('/memfd:doublemapper'),
  );
  if (!copy) return undefined;
  const first = await memory.read(copy.start, 1).catch(() => undefined);
  if (first?.[0] !== 0xc3) return undefined;
  const page = 0x1000n;
  return { start: copy.start, end: copy.end - copy.start > page ? copy.start + page : copy.end, kind: 'write barrier' };
}

/** What one pass found, with the cost of reading it. */
export interface RuntimeStubsRead {
  location: RuntimeLocation;
  walk: StubWalkResult;
  bytesRead: number;
  reads: number;
  ms: number;
}

/** Reads the stub table of the .NET process `pid` (host pid) whose files `files` opened. */
export async function readRuntimeStubs(
  pid: number,
  files: TargetFiles,
  options: {
    procRoot?: string;
    signal?: AbortSignal;
    memory?: Partial<MemoryLimits>;
    /** The runtime's version when known otherwise (a self-contained app's path names none): needed before .NET 10. */
    version?: string | undefined;
    /** The target's start time (ticks after boot, /proc/PID/stat), when known: another one means its pid was reused. */
    startTicks?: number | undefined;
  } = {},
): Promise<RuntimeStubsRead | { skipped: string }> {
  const maps = await readProcText(pid, 'maps', { procRoot: options.procRoot });
  const location = await locateRuntime(files, maps ?? '');
  if (!location) return { skipped: 'no libcoreclr.so mapped' };
  location.version ??= options.version;
  const major = Number(location.version?.split('.')[0]);
  // Before .NET 10 the layout is fixed per version: without a known one, nothing is read.
  const noLayout = {
    skipped:
      location.version === undefined
        ? `the version of ${location.library} is unknown, and before .NET 10 its layout depends on it`
        : `no known layout for .NET ${location.version} (only 8, 9 and 10 and later)`,
  };
  if (location.descriptor === undefined) {
    if (location.dacTable === undefined) return { skipped: `${location.library} exports no data descriptor` };
    if (!dacTableMajors.includes(major)) return noLayout;
  }
  const started = Date.now();
  const budget = new MemoryBudget(options.memory, options.signal);
  const memory = await ProcMemory.open(pid, budget, { procRoot: options.procRoot });
  // One deadline over every read: a read that never returns (memory the target backed with a hung FUSE file, say)
  // ends the pass when it passes. The work closes the file itself, once its last read returned (if ever: the reads
  // after it fail at once, the budget's time being over).
  return withDeadline(
    { timeoutMs: budget.limits.timeoutMs, signal: options.signal },
    `the memory of process ${pid}`,
    async () => {
      try {
        // maps and mem are opened by pid, one after the other. A start time still the target's once mem is open says
        // both were the target's (a pid never returns to a process that exited); had the target exited in between,
        // every read of mem fails.
        if (options.startTicks !== undefined) {
          const now = await readStat(pid, { procRoot: options.procRoot });
          if (now?.startTicks !== options.startTicks)
            return { skipped: `process ${pid} ${now ? 'is another process now (its pid was reused)' : 'exited'}` };
        }
        let descriptor =
          location.descriptor !== undefined ? await readContractDescriptor(memory, location.descriptor) : undefined;
        // .NET 9.0 exports a descriptor without the execution manager: the fixed layout of its version fills in.
        if (
          location.dacTable !== undefined &&
          descriptor?.global('ExecutionManagerCodeRangeMapAddress') === undefined
        ) {
          if (!dacTableMajors.includes(major)) return noLayout;
          descriptor = await dacTableDescriptor(memory, location.dacTable, major, descriptor);
        }
        if (!descriptor) throw new Error(`${location.library}: no descriptor to read`);
        const walk = await walkRuntimeStubs(memory, descriptor);
        const barriers = await findWriteBarrierCopy(memory, maps ?? '');
        if (barriers) walk.ranges = mergeRanges([...walk.ranges, barriers]);
        return { location, walk, bytesRead: memory.bytesRead, reads: memory.reads, ms: Date.now() - started };
      } finally {
        await memory.close();
      }
    },
  );
}

/** The collect step; see the top of this file. */
export function runtimeStubsStep(options: Partial<RuntimeStubsStepOptions> = {}): CollectStep {
  const passes: Record<string, unknown>[] = [];
  let kept: StubRange[] = [];
  const run =
    (pass: string) =>
    async (context: StepContext): Promise<StepReport | undefined> => {
      if (context.target.runtime !== 'dotnet') return undefined;
      const files = context.files;
      if (!files) throw new Error('the runtime-stubs step needs the session’s view of the target');
      let read: Awaited<ReturnType<typeof readRuntimeStubs>>;
      try {
        read = await readRuntimeStubs(context.target.pid, files, {
          procRoot: context.procRoot,
          signal: context.signal,
          memory: options.memory,
          version: context.target.dotnet?.version,
          startTicks: context.target.startTicks,
        });
      } catch (error) {
        if (context.signal.aborted) throw error;
        const reason = isProfcpuError(error) ? error.message : (error as Error).message;
        passes.push({ pass, skipped: reason });
        context.warn(`the .NET runtime's stubs were not read from its memory (${reason}): they stay unnamed`);
        return { passes };
      }
      if ('skipped' in read) {
        passes.push({ pass, skipped: read.skipped });
        return { passes };
      }
      const { walk } = read;
      kept = mergeRanges([...kept, ...walk.ranges]);
      const folder = await OutputFolder.open(context.dir);
      try {
        const summary = {
          bytesRead: read.bytesRead,
          reads: read.reads,
          ms: read.ms,
          sections: walk.sections,
          codeBlocks: walk.codeBlocks,
          stubBlocks: walk.stubBlocks,
          ...(walk.assumed.length > 0 && { assumed: walk.assumed }),
          ...(walk.skipped.length > 0 && { skipped: walk.skipped }),
        };
        await writeRuntimeStubTable(
          folder,
          {
            ranges: kept,
            runtimeVersion: read.location.version,
            source: read.location.descriptor ? 'contract descriptor' : 'g_dacTable',
          },
          summary,
        );
        passes.push({ pass, ranges: walk.ranges.length, ...summary });
      } finally {
        await folder.close();
      }
      context.progress(
        `read ${kept.length} ranges of .NET runtime stubs from the target's memory (${read.bytesRead} bytes, ${read.ms} ms)`,
      );
      return { file: layout.runtimeStubs, ranges: kept.length, runtimeVersion: read.location.version, passes };
    };
  return { name: 'runtime-stubs', beforeRecording: run('before'), afterRecording: run('after') };
}

/** Why the step read no table, from its report in the manifest (the last pass's reason); undefined if it read one. */
export function runtimeStubsSkipReason(report: StepReport | undefined): string | undefined {
  if (report === undefined || report['ranges'] !== undefined) return undefined;
  const passes = Array.isArray(report['passes']) ? (report['passes'] as Record<string, unknown>[]) : [];
  const skipped = passes.at(-1)?.['skipped'];
  return typeof skipped === 'string' ? skipped : undefined;
}

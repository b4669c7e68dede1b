// perf script's text, written from perf.data without perf: takes the reader's events (reader.ts) in perf's order and a
// Symbols source, gives the text `perf script --header --no-inline` prints with its default fields (comm, tid, cpu,
// time, period, event, then one `\t<ip> <sym>+0x<off> (<dso>)` line per frame and a blank line), given to a ScriptSink
// sample by sample as a header line and frame lines: a frame line (ScriptFrame) is made once per mapping and address,
// and the same object is given each time it recurs, so the sink can keep on it what it made of it (the fold's parse,
// the file's bytes).
//
// It keeps what perf's machine keeps (tools/perf/util/machine.c, thread.c, map.c): each thread's comm (`:<tid>` until
// one is known, the parent's after a fork), each process's mappings (a thread shares its leader's; a fork copies its
// parent's; a new mapping replaces what it overlaps), and names each frame the way perf 6.1 does: kernel addresses
// from kallsyms, file mappings by their offset in the file (the address printed is that offset), anonymous executable
// memory as `/tmp/perf-<pid>.map` with the address as is. Frames past perf script's default --max-stack (127) are
// dropped, as perf drops them.
import { context, contextMax, isDummyEvent, misc, sampleBit, type EventAttr } from './perf-data/format.js';
import type { PerfDataHeader, PerfEvent } from './perf-data/reader.js';
import type { MmapEvent, PerfTime, SampleEvent } from './perf-data/records.js';
import { scriptHeader } from './script-header.js';
import type { UnwindRow } from '../formats/elf/eh-frame.js';
import {
  countUnwinding,
  emptyTally,
  unwindSample,
  type SampleUnwinding,
  type UnwindTally,
} from './unwind/sample-unwind.js';

/** A symbol and the distance of an address into it. */
export interface SymbolHit {
  name: string;
  offset: bigint;
}

/** Where names come from: loaded on demand, so lookups of a file not loaded yet may return a promise. */
export interface ScriptSymbols {
  /** The symbol at a kernel address. */
  kernel(address: bigint): SymbolHit | undefined;
  /**
   * A kernel mapping record: it names a symbol and the address it had at recording (`[kernel.kallsyms]_text` at
   * pgoff), what perf places the kernel's symbols by (its ref_reloc_sym) when the kallsyms it reads is of another
   * boot; undefined for a record with pgoff 0 (addresses hidden at recording), which leaves perf none.
   */
  kernelReference?(reference: { name: string; address: bigint } | undefined): void;
  /** The symbol at `offset` in the file mapped as `mapping` (path and build-id as perf recorded them). */
  file(mapping: Mapping, offset: bigint): SymbolHit | undefined | Promise<SymbolHit | undefined>;
  /**
   * How to unwind code in the file mapped as `mapping`, for DWARF-mode samples (see unwind/sample-unwind.ts);
   * undefined when the file cannot be read. Without this method, DWARF-mode samples show their kernel frames only,
   * as with nothing to unwind by.
   */
  unwindRows?(mapping: Mapping): UnwindFile | undefined | Promise<UnwindFile | undefined>;
}

/** How to unwind the code of one file, by file offset. */
export interface UnwindFile {
  /** The CFI row at `offset`, undefined where none covers it. */
  rowAt(offset: bigint): UnwindRow | undefined;
  /** Whether the code at `offset` is .NET's (no CFI; stepped by frame pointer): a PE image's, a bundle's. */
  dotnet(offset: bigint): boolean;
}

/**
 * Files whose code is .NET's when they cannot be read: the JIT's double-mapped memory (memfd:doublemapper) and .NET
 * images (ReadyToRun code in `*.dll`, `*.exe`).
 */
function dotnetCodeFile(path: string): boolean {
  return path.startsWith('/memfd:') || /\.(dll|exe)( \(deleted\))?$/i.test(path);
}

export interface Mapping {
  start: bigint;
  end: bigint;
  pgoff: bigint;
  /** The name perf prints: the file's path, `[vdso]`, or `/tmp/perf-<pid>.map` for anonymous code. */
  dso: string;
  /** The path recorded in the mapping record. */
  path: string;
  buildId: string | undefined;
  /** Addresses are printed and looked up as they are (anonymous code), not as file offsets. */
  identity: boolean;
}

/**
 * One distinct frame line: made once per mapping and address, then given for every sample holding it, so a sink can
 * keep on it what it made of the line.
 */
export interface ScriptFrame {
  /** `\t<address> <symbol>+0x<offset> (<dso>)`, without its newline. */
  readonly line: string;
  /** Where the symbol's name ends in `line` (before `+0x<offset>`, or ` (<dso>)`). */
  readonly symbolEnd?: number;
  /** The sink's: undefined until it sets it. */
  memo: unknown;
}

/** Where the text goes. */
export interface ScriptSink {
  /** The `#` header, every line ending in a newline. */
  header(text: string): void | Promise<void>;
  /**
   * One sample: its header line, then `frames[0..count)`, its frame lines, all without their newline (the text is each
   * line followed by a newline, then a blank line). `frames` is reused for the next sample.
   */
  sample(header: string, frames: readonly ScriptFrame[], count: number): void | Promise<void>;
  /**
   * A sample whose text is not a header line and frame lines with their offsets and dsos: its whole text, lines ending
   * in a newline (perf prints a sample without a callchain on one line, with no blank line after: a header line ending
   * in its one frame, or a tracepoint's header line alone; a pipe's tracepoint frames show their symbols alone).
   */
  oneLine(text: string): void | Promise<void>;
}

export interface ScriptTextOptions {
  /** Keep only the samples of these processes (perf script --pid). Default: all. */
  pids: ReadonlySet<number> | undefined;
  /** Frames kept per sample (perf script --max-stack). Default 127. */
  maxStack: number;
  /** Frame lines cached, all mappings and the kernel together; past it the caches start afresh. Default 2^20. */
  maxCachedLines: number;
  /**
   * Print every sample's period, tracepoints' too (perf script -F +period): the off-CPU fold sets it to the time a
   * switch-out sample's thread stayed off the CPU, and weighs by it. Default false: perf script's default fields.
   */
  periodAlways: boolean;
  /**
   * Events whose samples are left out (perf script would print them): an off-CPU recording's switches, folded apart
   * (src/engine/offcpu/), out of the CPU profile. Default: none.
   */
  skipEvents: ReadonlySet<string> | undefined;
}

/** The high word of the lowest kernel address (0xffff800000000000). */
const kernelStartHigh = 0xffff8000;
/** The low words of the context markers this writer follows (their high word is all ones). */
const marker = Object.freeze({
  kernel: Number(context.kernel & 0xffffffffn),
  user: Number(context.user & 0xffffffffn),
  hv: Number(context.hv & 0xffffffffn),
  /** PERF_CONTEXT_MAX's: this or above is a marker. */
  max: Number(contextMax & 0xffffffffn),
});
const twoTo32 = 0x100000000;
/** High words below this make an address below 2^53: exact as a number. */
const exactHigh = 0x200000;
/** High words from this on are the top 2^53 addresses (the kernel's): keyed as numbers below zero. */
const topHigh = 0xffe00000;
const maxStackDefault = 127;
/** Frame lines cached in all (each a line, and the sink's memo of it: a few hundred bytes). */
const maxCachedLinesDefault = 1 << 20;

interface Thread {
  pid: number;
  comm: string;
  /** `comm tid ` as the sample header starts, made for `prefixComm`. */
  prefix: string;
  prefixComm: string | undefined;
  /** `%16s %5d `: the same with the comm padded, as a sample without a callchain starts. */
  paddedPrefix?: string;
  paddedComm?: string;
}

/**
 * What perf script prints of an event's samples by default (builtin-script.c's `output[]`): the fields of its type
 * (tracepoints: comm, tid, cpu, time, event name and the tracepoint's fields; the others: comm, tid, cpu, time,
 * period, event name and the frames), less those its type's first event does not record (evsel__check_attr), the
 * frames of tracepoints only when one of them has a callchain.
 */
interface SampleLayout {
  tid: boolean;
  cpu: boolean;
  time: boolean;
  period: boolean;
  /** The tracepoint's fields follow the event name. */
  trace: boolean;
  /** The frames are printed: the callchain on lines of their own, else the sample's address after the event. */
  ip: boolean;
  /** The sample has a callchain (its own lines, then a blank line); without, the comm is padded to 16 columns. */
  callchain: boolean;
  /**
   * The frames show the symbol alone, no offset nor dso: tracepoints in pipe mode, where perf script turns on only
   * their IP and SYM fields as each attribute arrives (builtin-script.c's process_attr).
   */
  symbolOnly: boolean;
  /**
   * The user frames are unwound from the sample's registers and stack snapshot (perf record --call-graph dwarf: the
   * event records REGS_USER and STACK_USER; its callchain holds the kernel's frames only).
   */
  dwarf: boolean;
}

/** perf_event_attr.type values perf script knows (PERF_TYPE_MAX is 6; others print as OUTPUT_TYPE_OTHER). */
const tracepointType = 2;
const otherType = 6;

/**
 * Each attribute's layout, as perf script decides it from the attributes (see SampleLayout): in file mode from them
 * all at once (perf_session__check_output_opt), in pipe mode as each arrives (process_attr).
 */
function sampleLayouts(attrs: readonly EventAttr[], pipe: boolean): SampleLayout[] {
  const typeOf = (attr: EventAttr) => (attr.type < 6 ? attr.type : otherType);
  const has = (attr: EventAttr, bit: bigint) => (attr.sampleType & bit) !== 0n;
  const byType = new Map<number, SampleLayout>();
  let combined = 0n;
  for (const attr of attrs) {
    combined |= attr.sampleType;
    const type = typeOf(attr);
    if (byType.has(type) || isDummyEvent(attr)) continue;
    const tracepoint = type === tracepointType;
    // In pipe mode a tracepoint's frames show when the attributes so far have call graphs.
    const callchains =
      (combined & (sampleBit.callchain | sampleBit.branchStack)) !== 0n ||
      ((combined & sampleBit.regsUser) !== 0n && (combined & sampleBit.stackUser) !== 0n);
    byType.set(type, {
      tid: has(attr, sampleBit.tid),
      cpu: has(attr, sampleBit.cpu),
      time: has(attr, sampleBit.time),
      period: !tracepoint,
      trace: tracepoint,
      ip: tracepoint ? pipe && callchains : has(attr, sampleBit.ip),
      callchain: false,
      symbolOnly: tracepoint && pipe,
      dwarf: false,
    });
  }
  // In a file, tracepoints show frames when one of them has a callchain (and so does any event, as perf's
  // use_callchain says).
  const tracepoints = byType.get(tracepointType);
  if (!pipe && tracepoints && attrs.some((attr) => typeOf(attr) === tracepointType && has(attr, sampleBit.callchain)))
    tracepoints.ip = true;
  return attrs.map((attr) => {
    const layout = byType.get(typeOf(attr)) ?? defaultLayout;
    const callchain = layout.ip && has(attr, sampleBit.callchain);
    return {
      ...layout,
      callchain,
      dwarf: callchain && has(attr, sampleBit.regsUser) && has(attr, sampleBit.stackUser),
    };
  });
}

/** A mapping as the writer keeps it: its bounds as numbers for the search, and the frame lines made in it. */
interface Mapped {
  readonly mapping: Mapping;
  /**
   * The bounds as numbers, for the search of an address below 2^53: a bound past 2^53 (the vsyscall page) is a number
   * past it too, so the comparisons are exact all the same.
   */
  readonly start: number;
  readonly end: number;
  /** Lines made in the mapping by address - start; those of an older generation of the caches are dropped. */
  lines: Map<number, ScriptFrame>;
  generation: number;
}

interface Maps {
  /** Sorted by start, none overlapping. */
  list: Mapped[];
  /** Names these mappings in the frame table: a new number whenever they change. */
  space: number;
}

/** Spaces of the frame table: 0 marks an empty slot, 1 the kernel's lines, 2 a process with no mappings. */
const kernelSpace = 1;
/** The mappings of a process none were recorded for (not frozen: one object shape for all the Maps). */
const noMaps: Maps = { list: [], space: 2 };
const firstSpace = 3;
/** Slots of the frame table: 2^bits. */
const frameSlotBits = 16;
const frameSlots = 1 << frameSlotBits;
const maxExact = 1n << 53n;

/** The name of the kernel's mapping record, followed by the reference symbol's (`[kernel.kallsyms]_text`). */
const kernelMapName = '[kernel.kallsyms]';

/** The reference symbol's name in a kernel mapping record's file name, as perf keeps it (see mmap()). */
function referenceName(filename: string): string {
  const kept = Buffer.from(filename).subarray(0, 255).toString('utf8');
  const name = kept.slice(kernelMapName.length);
  const bracket = name.indexOf(']');
  return bracket < 0 ? name : name.slice(0, bracket);
}

export class ScriptTextWriter {
  private readonly threads = new Map<number, Thread>();
  private readonly maps = new Map<number, Maps>();
  private nameWidth = 0;
  private style: ScriptStyle = styleOf(undefined);
  private names: string[] = [];
  /** By attribute index: its samples are left out (options.skipEvents). */
  private skipped: boolean[] = [];
  private layouts: SampleLayout[] = [];
  private readonly frames: ScriptFrame[] = [];
  private readonly options: ScriptTextOptions;
  /**
   * Kernel frame lines: those of the top 4 GiB (where the kernel's text lies) by their low word as an int32, which
   * is a small integer to V8 (a key made with no allocation), the others by lineKey (addresses without one: not kept).
   */
  private readonly kernelTopLines = new Map<number, ScriptFrame>();
  private readonly kernelLines = new Map<number, ScriptFrame>();
  /** Frames in no mapping: their line depends on the address only. */
  private readonly unmappedLines = new Map<number, ScriptFrame>();
  /** The mappings' caches (Mapped.lines) of another generation are stale: a bump drops them all at once. */
  private generation = 0;
  /** Lines in the caches above and the mappings': one bound over all of them, as a recording may map many files. */
  private linesCached = 0;
  /** `<event>: ` as each attribute's samples end their header line. */
  private eventTails: string[] = [];
  /** The parts of the header line that repeat from one sample to the next, made once. */
  private readonly cpuTexts: string[] = [];
  private lastSeconds = -1;
  private secondsText = '';
  private lastPeriod: number | bigint = -1;
  private periodText = '';
  /**
   * A direct-mapped table in front of the caches above, which most frames hit: its slot's keys (space, high word, low
   * word of the address) and its line. Cleared with the caches, so it keeps no line they dropped.
   */
  private readonly slotKeys = new Uint32Array(frameSlots * 3);
  private readonly slotLines: (ScriptFrame | undefined)[] = new Array<ScriptFrame | undefined>(frameSlots).fill(
    undefined,
  );
  private nextSpace = firstSpace;
  /** A 32-bit view of the callchain slab being read: the entries as two words each, without a bigint each. */
  private words: Uint32Array<ArrayBufferLike> = new Uint32Array(0);
  private wordsBuffer: ArrayBufferLike | undefined;
  samples = 0;
  /** The DWARF-mode samples' unwinding (see unwind/sample-unwind.ts). */
  readonly unwound: UnwindTally = emptyTally();

  constructor(
    private readonly symbols: ScriptSymbols,
    private readonly sink: ScriptSink,
    options: Partial<ScriptTextOptions> = {},
  ) {
    this.options = {
      pids: undefined,
      maxStack: maxStackDefault,
      maxCachedLines: maxCachedLinesDefault,
      periodAlways: false,
      skipEvents: undefined,
      ...options,
    };
  }

  /** The `#` header perf script --header prints first (script-header.ts). */
  async header(header: PerfDataHeader): Promise<void> {
    this.style = styleOf(header.features.perfVersion);
    this.names = header.attrs.map((attr) => attr.name ?? '[unknown]');
    this.skipped = this.names.map((name) => this.options.skipEvents?.has(name) ?? false);
    this.layouts = sampleLayouts(header.attrs, header.mode === 'pipe');
    if (this.options.periodAlways) for (const layout of this.layouts) layout.period = true;
    this.nameWidth = Math.max(0, ...this.names.map((name) => name.length));
    this.eventTails = this.names.map((name) => `${name.padStart(this.nameWidth)}: `);
    await this.sink.header(scriptHeader(header, this.names, this.style.attrLines));
  }

  /** Takes the next event; a promise only when it has to be waited for (a symbol table loading, the sink). */
  event(event: PerfEvent): void | Promise<void> {
    switch (event.kind) {
      case 'sample':
        return this.sample(event);
      case 'comm':
        this.thread(event.pid, event.tid).comm = event.comm;
        return;
      case 'fork':
        return this.fork(event.pid, event.tid, event.ppid, event.ptid, event.exec);
      case 'mmap':
        return this.mmap(event);
      case 'exit':
        // perf 6.12 forgets an exited thread: a sample of its tid after the EXIT record has no comm (`:tid`). The
        // process's mappings stay (its other threads hold them in perf), and so does the idle task (tid 0).
        if (!this.style.keepsExited && event.tid > 0) this.threads.delete(event.tid);
        return;
      default:
        return;
    }
  }

  private thread(pid: number, tid: number): Thread {
    let thread = this.threads.get(tid);
    if (!thread || (pid >= 0 && thread.pid < 0)) {
      // perf script registers the idle task as `swapper`; other threads are `:<tid>` until a COMM names them.
      thread = { pid, comm: thread?.comm ?? (tid === 0 ? 'swapper' : `:${tid}`), prefix: '', prefixComm: undefined };
      this.threads.set(tid, thread);
    }
    if (pid !== tid && pid >= 0) this.mapsOf(pid);
    return thread;
  }

  private mapsOf(pid: number): Maps {
    let maps = this.maps.get(pid);
    if (!maps) this.maps.set(pid, (maps = { list: [], space: this.space() }));
    return maps;
  }

  /** A number for mappings new or changed. Past 2^32 - 1 the table starts afresh and every process is renumbered. */
  private space(): number {
    if (this.nextSpace === 0xffffffff) {
      this.clearTable();
      this.nextSpace = firstSpace;
      for (const maps of this.maps.values()) maps.space = this.nextSpace++;
    }
    return this.nextSpace++;
  }

  private clearTable(): void {
    this.slotKeys.fill(0);
    this.slotLines.fill(undefined);
  }

  private mapped(mapping: Mapping): Mapped {
    return {
      mapping,
      start: Number(mapping.start),
      end: Number(mapping.end),
      lines: new Map(),
      generation: this.generation,
    };
  }

  private fork(pid: number, tid: number, ppid: number, ptid: number, synthesized: boolean): void {
    const parent = this.thread(ppid, ptid);
    // A tid reused: the old thread goes.
    this.threads.set(tid, { pid, comm: parent.comm, prefix: '', prefixComm: undefined });
    // A process that ran before the recording gets its own mappings from the records that follow, not its parent's.
    if (pid !== ppid) this.maps.set(pid, { list: synthesized ? [] : [...this.mapsOf(ppid).list], space: this.space() });
  }

  private mmap(event: MmapEvent): void {
    // The kernel's mapping names the symbol its place is known by, with that place as pgoff (0 when addresses were
    // hidden at recording): perf's machine__process_kernel_mmap_event, which compares the name's first 16 characters
    // only and keeps 255 bytes of it, and map__set_kallsyms_ref_reloc_sym, which ends it at a `]`. Each such record
    // makes the kernel's map anew, without a reference when its pgoff is 0.
    if (event.cpumode === misc.kernel && event.filename.startsWith(kernelMapName.slice(0, -1)))
      this.symbols.kernelReference?.(
        event.pgoff === 0n ? undefined : { name: referenceName(event.filename), address: event.pgoff },
      );
    // The kernel's mappings (pid -1) are looked up by address range alone: see frame().
    if (event.pid < 0 || event.cpumode === misc.kernel) return;
    if (event.prot !== undefined && (event.prot & 4) === 0) return;
    const maps = this.mapsOf(event.pid);
    this.thread(event.pid, event.tid);
    const anon = isAnonymous(event.filename);
    const mapping: Mapping = {
      start: event.start,
      end: event.start + event.length,
      pgoff: event.pgoff,
      dso: anon ? `/tmp/perf-${event.pid}.map` : event.filename,
      path: event.filename,
      buildId: event.buildId,
      identity: anon || isNoDso(event.filename),
    };
    // What the new mapping overlaps is cut away, as the kernel did.
    const kept: Mapped[] = [];
    for (const entry of maps.list) {
      const old = entry.mapping;
      if (old.end <= mapping.start || old.start >= mapping.end) kept.push(entry);
      else {
        if (old.start < mapping.start) kept.push(this.mapped({ ...old, end: mapping.start }));
        if (old.end > mapping.end)
          kept.push(
            this.mapped({
              ...old,
              start: mapping.end,
              pgoff: old.identity ? old.pgoff : old.pgoff + (mapping.end - old.start),
            }),
          );
      }
    }
    kept.push(this.mapped(mapping));
    kept.sort((a, b) => (a.mapping.start < b.mapping.start ? -1 : a.mapping.start > b.mapping.start ? 1 : 0));
    maps.list = kept;
    maps.space = this.space();
  }

  private sample(sample: SampleEvent): void | Promise<void> {
    if (this.options.pids && !this.options.pids.has(sample.pid)) return;
    if (this.skipped[sample.attr]) return;
    this.samples++;
    const thread = this.thread(sample.pid, sample.tid);
    const layout = this.layouts[sample.attr] ?? defaultLayout;
    let line: string;
    if (layout.callchain) {
      if (thread.prefixComm !== thread.comm) {
        thread.prefix = `${thread.comm} ${layout.tid ? `${String(sample.tid).padStart(this.style.tidWidth)} ` : ''}`;
        thread.prefixComm = thread.comm;
      }
      line = thread.prefix;
    } else {
      if (thread.paddedComm !== thread.comm) {
        thread.paddedPrefix = `${thread.comm.padStart(16)} ${String(sample.tid).padStart(this.style.tidWidth)} `;
        thread.paddedComm = thread.comm;
      }
      line = layout.tid ? thread.paddedPrefix! : `${thread.comm.padStart(16)} `;
    }
    if (layout.cpu && sample.cpu !== undefined) line += this.cpuText(sample.cpu);
    if (layout.time && sample.time !== undefined) line += this.timeText(sample.time);
    if (layout.period) {
      if (sample.period !== this.lastPeriod) {
        this.lastPeriod = sample.period;
        this.periodText = `${String(sample.period).padStart(10)} `;
      }
      line += this.periodText;
    }
    line += this.eventTails[sample.attr] ?? `${(this.names[sample.attr] ?? '[unknown]').padStart(this.nameWidth)}: `;
    const maps = this.maps.get(sample.pid < 0 ? -1 : sample.pid) ?? noMaps;
    if (layout.dwarf && sample.callchain && this.symbols.unwindRows) {
      const form = layout.symbolOnly ? 'symbols' : 'lines';
      // perf unwinds nothing without a stack copy (a sample of a kernel thread, dyn_size 0): the kernel's frames only.
      if (!sample.userRegs || !sample.userStack || sample.userStack.length === 0)
        return this.frameLines(line, kernelPart(sample.callchain), 0, 0, 0, maps, form);
      const unwound = this.unwindUser(sample, maps);
      const lines = (user: SampleUnwinding) => {
        const { chain, frames } = withUserFrames(sample.callchain!, user.frames, this.options.maxStack);
        return this.frameLines(line, chain, 0, 0, 0, maps, form, frames);
      };
      return unwound instanceof Promise ? unwound.then(lines) : lines(unwound);
    }
    if (layout.callchain && sample.callchain)
      // With a callchain, its context markers say where each frame is.
      return this.frameLines(line, sample.callchain, 0, 0, 0, maps, layout.symbolOnly ? 'symbols' : 'lines');
    // Without, perf prints the sample's address (as it is, not as a file offset) after the event, on its line.
    if (!layout.ip) return this.sink.oneLine(`${line}\n`);
    return this.frameLines(line, BigUint64Array.of(sample.ip), 0, 0, sample.cpumode, maps, 'oneLine');
  }

  /** The user frames of a DWARF-mode sample, unwound in the process's mappings, counted in `unwound`. */
  private unwindUser(sample: SampleEvent, maps: Maps): SampleUnwinding | Promise<SampleUnwinding> {
    const rowsOf = this.symbols.unwindRows!.bind(this.symbols);
    const at = (pc: bigint) => {
      const mapping = findMappingBig(maps.list, pc)?.mapping;
      const offset = mapping && (mapping.identity ? pc : pc - mapping.start + mapping.pgoff);
      return { mapping, offset: offset ?? 0n, file: mapping && !mapping.identity ? rowsOf(mapping) : undefined };
    };
    const result = unwindSample(sample.userRegs!, sample.userStack!, {
      rowAt(pc) {
        const { file, offset } = at(pc);
        return file instanceof Promise ? file : file?.rowAt(offset);
      },
      // Anonymous executable memory is the JIT's (perf names it from its perf map).
      framePointers(pc) {
        const { mapping, file, offset } = at(pc);
        if (file instanceof Promise) return false;
        // Code in no mapping perf recorded: memory made executable after it was mapped (mprotect makes no record).
        if (!mapping) return 'fallback';
        if (mapping.identity) return 'dotnet';
        return (file ? file.dotnet(offset) : dotnetCodeFile(mapping.path)) ? 'dotnet' : 'fallback';
      },
    });
    const count = (done: SampleUnwinding) => {
      countUnwinding(this.unwound, done);
      return done;
    };
    return result instanceof Promise ? result.then(count) : count(result);
  }

  /** `[cpu] ` as perf prints it. */
  private cpuText(cpu: number): string {
    const known = this.cpuTexts[cpu];
    if (known !== undefined) return known;
    const text = `[${String(cpu).padStart(3, '0')}] `;
    // A forged cpu number is made each time rather than kept.
    if (cpu < 4096) this.cpuTexts[cpu] = text;
    return text;
  }

  /** `seconds.micros: ` of a time in nanoseconds, as perf prints it. */
  private timeText(time: PerfTime): string {
    if (typeof time === 'bigint') return `${timestamp(time)}: `;
    const seconds = Math.floor(time / 1e9);
    if (seconds !== this.lastSeconds) {
      this.lastSeconds = seconds;
      this.secondsText = `${String(seconds).padStart(5)}.`;
    }
    // time - seconds * 1e9 is time % 1e9, exactly (every term is an integer below 2^53), without a float remainder.
    const micros = Math.floor((time - seconds * 1e9) / 1000);
    const thousands = Math.floor(micros / 1000);
    return `${this.secondsText}${threeDigits[thousands]}${threeDigits[micros - thousands * 1000]}: `;
  }

  /** The frame lines of `chain` from entry `from` (`made` lines made so far), then the sample to the sink. */
  private frameLines(
    header: string,
    chain: BigUint64Array,
    from: number,
    made: number,
    mode: number,
    maps: Maps,
    form: 'lines' | 'oneLine' | 'symbols' = 'lines',
    maxFrames = this.options.maxStack,
  ): void | Promise<void> {
    if (chain.buffer !== this.wordsBuffer) {
      this.wordsBuffer = chain.buffer;
      // The buffer may be a chunk read whose length is no multiple of 4 (a forged record size): whole words only.
      this.words = new Uint32Array(chain.buffer, 0, chain.buffer.byteLength >>> 2);
    }
    // Each entry as its low and high words (the machine is little-endian, as the recording: see CallchainSlab).
    const words = this.words;
    const base = chain.byteOffset >> 2;
    let cpumode = mode;
    let frames = made;
    for (let i = from; i < chain.length && frames < maxFrames; i++) {
      const low = words[base + 2 * i]!;
      const high = words[base + 2 * i + 1]!;
      if (high === 0xffffffff && low >= marker.max) {
        // perf reads any other marker as a corrupted chain and prints the sample with no frames at all.
        if (low !== marker.kernel && low !== marker.user && low !== marker.hv) {
          frames = 0;
          break;
        }
        cpumode = low === marker.kernel ? misc.kernel : low === marker.user ? misc.user : misc.hypervisor;
        continue;
      }
      // The line depends on the address and the process's mappings, or on the address alone for the kernel's.
      const space =
        cpumode === misc.kernel || (cpumode === 0 && high >= kernelStartHigh)
          ? kernelSpace
          : cpumode === misc.hypervisor
            ? 0
            : maps.space;
      const slot = (Math.imul(low, 0x9e3779b1) ^ Math.imul(high ^ space, 0x85ebca6b)) >>> (32 - frameSlotBits);
      const keys = this.slotKeys;
      if (space !== 0 && keys[slot * 3] === space && keys[slot * 3 + 1] === high && keys[slot * 3 + 2] === low) {
        this.frames[frames++] = this.slotLines[slot]!;
        continue;
      }
      const frame = this.frame(high, low, cpumode, maps);
      if (space !== 0 && !(frame instanceof Promise)) {
        keys[slot * 3] = space;
        keys[slot * 3 + 1] = high;
        keys[slot * 3 + 2] = low;
        this.slotLines[slot] = frame;
      }
      // A symbol table still loading: the rest waits for it.
      if (frame instanceof Promise)
        return frame.then((line) => {
          this.frames[frames] = line;
          return this.frameLines(header, chain, i + 1, frames + 1, cpumode, maps, form, maxFrames);
        });
      this.frames[frames++] = frame;
    }
    if (form === 'oneLine') return this.sink.oneLine(`${header} ${oneLineFrame(this.frames[0]!, chain[0]!)}\n`);
    if (form === 'symbols') {
      let text = `${header}\n`;
      for (let i = 0; i < frames; i++) text += `${this.frames[i]!.line.slice(0, this.frames[i]!.symbolEnd)}\n`;
      return this.sink.oneLine(`${text}\n`);
    }
    return this.sink.sample(header, this.frames, frames);
  }

  /**
   * The line of the frame at the address whose words are `high` and `low`. The address is handled as numbers: a
   * bigint is made only for a line not cached yet, to look its name up and print it.
   */
  private frame(high: number, low: number, cpumode: number, maps: Maps): ScriptFrame | Promise<ScriptFrame> {
    // perf looks a hypervisor address up nowhere.
    if (cpumode === misc.hypervisor) return frameLine(u64(high, low), undefined, '[unknown]');
    const keyed = high < exactHigh || high >= topHigh;
    if (cpumode === misc.kernel || (cpumode === 0 && high >= kernelStartHigh)) {
      const top = high === 0xffffffff;
      const cache = top ? this.kernelTopLines : this.kernelLines;
      const key = top ? low | 0 : lineKey(high, low);
      let line = top || keyed ? cache.get(key) : undefined;
      if (line === undefined) {
        const ip = u64(high, low);
        line = frameLine(ip, this.symbols.kernel(ip), '[kernel.kallsyms]');
        if (top || keyed) this.remember(cache, key, line);
      }
      return line;
    }
    const exact = high < exactHigh;
    const mapped = exact ? findMapping(maps.list, high * twoTo32 + low) : findMappingBig(maps.list, u64(high, low));
    if (!mapped) {
      let line = keyed ? this.unmappedLines.get(lineKey(high, low)) : undefined;
      if (line === undefined) {
        line = frameLine(u64(high, low), undefined, '[unknown]');
        if (keyed) this.remember(this.unmappedLines, lineKey(high, low), line);
      }
      return line;
    }
    // A frame's line depends on its mapping and address only: most frames recur, so each line is made once.
    if (mapped.generation !== this.generation) {
      mapped.lines = new Map();
      mapped.generation = this.generation;
    }
    const lines = mapped.lines;
    const mapping = mapped.mapping;
    // The distance into the mapping is the key; past 2^53 (only a forged file has such a mapping) it is not cached.
    const distance = exact ? high * twoTo32 + low - mapped.start : u64(high, low) - mapping.start;
    const key = typeof distance === 'number' ? distance : distance < maxExact ? Number(distance) : -1;
    if (key >= 0) {
      const known = lines.get(key);
      if (known !== undefined) return known;
    }
    const ip = u64(high, low);
    const address = mapping.identity ? ip : ip - mapping.start + mapping.pgoff;
    const found = this.symbols.file(mapping, address);
    const make = (hit: SymbolHit | undefined) => {
      const line = frameLine(this.style.fileOffsets ? address : ip, hit, mapping.dso);
      if (key >= 0) this.remember(lines, key, line);
      return line;
    };
    return found instanceof Promise ? found.then(make) : make(found);
  }

  /** Caches a frame line, within a bound: past it, all the caches start afresh. */
  private remember(cache: Map<number, ScriptFrame>, key: number, line: ScriptFrame): void {
    if (this.linesCached >= this.options.maxCachedLines) {
      // `cache` may be a mapping's made stale here: the line goes into it all the same, and it is dropped after.
      this.kernelTopLines.clear();
      this.kernelLines.clear();
      this.unmappedLines.clear();
      this.clearTable();
      this.generation++;
      this.linesCached = 0;
    }
    cache.set(key, line);
    this.linesCached++;
  }
}

/** A sample of an event perf script knows nothing of: its defaults for other types. */
const defaultLayout: SampleLayout = Object.freeze({
  tid: true,
  cpu: true,
  time: true,
  period: true,
  trace: false,
  ip: true,
  callchain: true,
  symbolOnly: false,
  dwarf: false,
});

/**
 * A frame line as perf prints a sample's only frame on its header line: the address as it is in memory (where a
 * callchain's lines give a file's frames at their offset, perf 6.1), then `sym+off (dso)`.
 */
function oneLineFrame(frame: ScriptFrame, ip: bigint): string {
  const line = frame.line;
  const space = line.indexOf(' ', line.search(/[0-9a-f]/));
  return `${ip.toString(16).padStart(16)}${line.slice(space)}`;
}

/** The recorded callchain of a DWARF-mode sample up to a PERF_CONTEXT_USER marker, if it has one: the kernel's part. */
function kernelPart(chain: BigUint64Array): BigUint64Array {
  const user = chain.indexOf(context.user);
  return user < 0 ? chain : chain.subarray(0, user);
}

/**
 * A DWARF-mode sample's frames as perf gives them: the kernel's part of the recorded callchain, `maxStack` frames of it
 * at most, then the unwound user frames (127 at most already) after a PERF_CONTEXT_USER marker; and the frames in all.
 * perf caps the two parts each (thread__resolve_callchain_sample, then _unwind, each with max_stack), not together.
 */
function withUserFrames(
  chain: BigUint64Array,
  user: readonly bigint[],
  maxStack: number,
): { chain: BigUint64Array; frames: number } {
  let kernel = kernelPart(chain);
  let frames = 0;
  for (let i = 0; i < kernel.length; i++) {
    if (kernel[i]! >= contextMax) continue;
    if (frames === maxStack) {
      kernel = kernel.subarray(0, i);
      break;
    }
    frames++;
  }
  if (user.length === 0) return { chain: kernel, frames };
  const out = new BigUint64Array(kernel.length + 1 + user.length);
  out.set(kernel);
  out[kernel.length] = context.user;
  for (let i = 0; i < user.length; i++) out[kernel.length + 1 + i] = user[i]!;
  return { chain: out, frames: frames + user.length };
}

/** The address whose words are `high` and `low`. */
function u64(high: number, low: number): bigint {
  return high < exactHigh ? BigInt(high * twoTo32 + low) : (BigInt(high) << 32n) | BigInt(low);
}

/**
 * A number that stands for an address as a cache key, for the addresses whose high word passes `high < exactHigh ||
 * high >= topHigh` (user space and the kernel's top of the address space): the address itself below 2^53, minus one
 * minus its distance from the top 2^53 for the others.
 */
function lineKey(high: number, low: number): number {
  return high < exactHigh ? high * twoTo32 + low : -1 - ((high - topHigh) * twoTo32 + low);
}

/** `seconds.micros` of a time in nanoseconds, as perf prints it. */
function timestamp(time: bigint): string {
  let seconds: number | bigint;
  let micros: number | bigint;
  if (time <= maxSafe) {
    const ns = Number(time);
    seconds = Math.floor(ns / 1e9);
    micros = Math.floor((ns % 1e9) / 1000);
  } else {
    seconds = time / 1_000_000_000n;
    micros = (time % 1_000_000_000n) / 1000n;
  }
  return `${String(seconds).padStart(5)}.${String(micros).padStart(6, '0')}`;
}

const maxSafe = BigInt(Number.MAX_SAFE_INTEGER);

/** `000` to `999`: the microseconds of a timestamp are two of them. */
const threeDigits = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

/**
 * What changed in perf script's text between the versions checked (6.1.187 and 6.12.117): 6.12 pads the tid to 7
 * columns (6.1: 5), prints a file frame's address as it was in memory (6.1: its offset in the file) and forgets an
 * exited thread (6.1 keeps its comm for samples after its EXIT record). A recording
 * reads as the perf that wrote it would print it; versions between the two are taken as 6.12.
 */
interface ScriptStyle {
  tidWidth: number;
  fileOffsets: boolean;
  /** An exited thread keeps its comm (6.1); 6.12 removes it from its machine. */
  keepsExited: boolean;
  /** The header's event lines list the attribute as 6.1 prints it (event-line.ts); 6.12 names types and configs. */
  attrLines: boolean;
}

function styleOf(perfVersion: string | undefined): ScriptStyle {
  const m = /^(\d+)\.(\d+)/.exec(perfVersion ?? '');
  const older = !m || Number(m[1]) < 6 || (Number(m[1]) === 6 && Number(m[2]) <= 1);
  return older
    ? { tidWidth: 5, fileOffsets: true, keepsExited: true, attrLines: true }
    : { tidWidth: 7, fileOffsets: false, keepsExited: false, attrLines: false };
}

function frameLine(address: bigint, hit: SymbolHit | undefined, dso: string): ScriptFrame {
  const symbol = `\t${address.toString(16).padStart(16)} ${hit ? hit.name : '[unknown]'}`;
  const line = hit ? `${symbol}+0x${hit.offset.toString(16)} (${dso})` : `${symbol} (${dso})`;
  return { line, symbolEnd: symbol.length, memo: undefined };
}

/** The mapping holding `ip`, by numbers: exact for an `ip` below 2^53 (see Mapped.start). */
function findMapping(list: readonly Mapped[], ip: number): Mapped | undefined {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const m = list[mid]!;
    if (ip < m.start) hi = mid - 1;
    else if (ip >= m.end) lo = mid + 1;
    else return m;
  }
  return undefined;
}

/** findMapping for addresses past 2^53, by bigints. */
function findMappingBig(list: readonly Mapped[], ip: bigint): Mapped | undefined {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const m = list[mid]!.mapping;
    if (ip < m.start) hi = mid - 1;
    else if (ip >= m.end) lo = mid + 1;
    else return list[mid];
  }
  return undefined;
}

/** perf's is_anon_memory: code there is named from /tmp/perf-<pid>.map. */
function isAnonymous(path: string): boolean {
  return path === '//anon' || path.startsWith('/dev/zero') || path.startsWith('/anon_hugepage');
}

/** perf's is_no_dso_memory: addresses used as they are. */
function isNoDso(path: string): boolean {
  return path.startsWith('[stack') || path.startsWith('/SYSV') || path === '[heap]';
}

// The off-CPU fold of a recording of the scheduler's switches (`perf record -e sched:sched_switch -g
// --switch-events`): each sched_switch sample, the stack its thread left the CPU from, is held until the thread's next
// SWITCH IN (switch-pairing.ts), then written as the built-in engine writes every sample (ScriptTextWriter, named from
// the folder as the CPU flame graph is) with its period set to the time the thread stayed off the CPU, in
// microseconds, and folded weighted by that period: folded stacks whose counts are microseconds off the CPU.
//
// A held sample is written when its thread comes back, after the records that came in between: a mapping that changed
// meanwhile names its frames as it is then (a moment later than perf's own reading of the sample would).
import type { Warn } from '../../diagnostics.js';
import type { OutputFolder } from '../../files/output-folder.js';
import { layout } from '../../output/layout.js';
import { rootFrameName, StackFolder, type FoldOptions, type FoldResult } from '../../stacks/fold.js';
import type { FrameResolver } from '../../stacks/frame-name.js';
import { PerfMaps } from '../../jit/jit-maps.js';
import { mapsToPlace } from '../../jit/perf-maps.js';
import { builtinEngineSymbols, recordedHere } from '../frame-symbols.js';
import { readPerfDataFile, type PerfDataHeader, type ReadHandlers } from '../perf-data/reader.js';
import { isDummyEvent, type EventAttr } from '../perf-data/format.js';
import type { SampleEvent } from '../perf-data/records.js';
import { ScriptTextWriter, type ScriptFrame, type ScriptSink } from '../script-text.js';
import { SwitchPairing, type PairingCounts } from './switch-pairing.js';
import type { UnwindTally } from '../unwind/sample-unwind.js';

/** The event whose samples are the switch-outs. */
export const switchEvent = 'sched:sched_switch';

/**
 * A recording `collect --off-cpu` made: the switch tracepoint beside a CPU event (the first other one that samples;
 * perf's dummy events never do), with the kernel's switch records (an event with context_switch: --switch-events).
 * Its CPU profile leaves the switches out; they make the off-CPU profile. Any other recording of the switches is
 * folded as perf script prints it, by count.
 */
export function offCpuRecording(header: Pick<PerfDataHeader, 'attrs'>): { cpuEvent: string } | undefined {
  const { attrs } = header;
  if (!attrs.some((attr) => attr.name === switchEvent) || !attrs.some((attr) => attr.contextSwitch)) return undefined;
  const cpu = attrs.find((attr) => attr.name !== switchEvent && !isDummyEvent(attr));
  return cpu?.name === undefined ? undefined : { cpuEvent: cpu.name };
}

export interface OffCpuFold {
  /** Folded stacks, each weighed in microseconds off the CPU. */
  fold: FoldResult;
  /**
   * Stretches off the CPU folded (blocked, and `open`: still off when the recording ended), and those left out:
   * preempted (still runnable) unless asked for, `short` ones (under minBlockUs, or under half a microsecond),
   * `unheld` ones (more threads off the CPU at once than maxHeldBytes of their stacks holds).
   */
  intervals: { blocked: number; preempted: number; open: number; short: number; unheld: number };
  /** Switch records with no partner (pairing's counts). */
  unpaired: PairingCounts;
  /** How the switches' stack copies were unwound (mixed unwinding), when they had some. */
  unwound?: UnwindTally;
  /**
   * Microseconds threads spent runnable but waiting for a CPU (preempted), by thread name as the folds' root frames
   * spell it: the wall-clock view's third part, beside CPU samples and time blocked.
   */
  runnableUs: Map<string, number>;
  /** The CPU time one sample of the CPU event stands for, µs (1/frequency), when it says. */
  cpuUsPerSample?: number;
}

/**
 * The CPU time a sample of `attr` stands for, µs: 1/frequency when the kernel kept a frequency (collect records so),
 * the fixed period of a time-counting event (cpu-clock, task-clock: ns), else nothing (a count of cycles is no time).
 */
export function microsecondsPerSample(attr: EventAttr): number | undefined {
  if (attr.samplePeriod <= 0n) return undefined;
  if (attr.freq) return 1e6 / Number(attr.samplePeriod);
  return isClockEvent(attr) ? Number(attr.samplePeriod) / 1000 : undefined;
}

/** cpu-clock or task-clock (software events 0 and 1): their periods are nanoseconds. */
export function isClockEvent(attr: Pick<EventAttr, 'type' | 'config'>): boolean {
  return attr.type === 1 && attr.config <= 1n;
}

export interface OffCpuFoldOptions {
  fold: Partial<FoldOptions>;
  /** Fold the stretches a thread was preempted (waiting for a CPU) too. Default false: blocked time only. */
  preempted?: boolean;
  /** Stretches shorter than this many microseconds are dropped, counted. Default 0. */
  minBlockUs?: number;
  /** Keep only these processes' threads (a cgroup's recording holds its other processes too). Default: all. */
  pids?: ReadonlySet<number> | undefined;
  /** Bytes of switch samples held at once at most (see maxHeldBytes). Default maxHeldBytes. */
  maxHeldBytes?: number;
}

/** Text of one sample, as perf script prints it, for the fold (StackFolder.write parses it as perf script's). */
class FoldSink implements ScriptSink {
  constructor(private readonly folder: StackFolder) {}
  header(text: string): void {
    this.folder.write(Buffer.from(text));
  }
  sample(header: string, frames: readonly ScriptFrame[], count: number): void {
    let text = `${header}\n`;
    for (let i = 0; i < count; i++) text += `${frames[i]!.line}\n`;
    this.folder.write(Buffer.from(`${text}\n`));
  }
  oneLine(text: string): void {
    this.folder.write(Buffer.from(text));
  }
}

/**
 * Bytes of switch samples held at once at most (their stack copies, 8 KiB each, mostly): 32 768 threads off the CPU
 * at once. A target can start far more threads than that and block them all; past it, a switch out is not held, its
 * stretch counted as `unheld`.
 */
const maxHeldBytes = 256 << 20;

/** What a held sample takes: its arrays and the object around them. */
function heldSize(sample: SampleEvent): number {
  return (
    256 +
    (sample.callchain?.byteLength ?? 0) +
    (sample.userRegs?.values.byteLength ?? 0) +
    (sample.userStack?.length ?? 0)
  );
}

/**
 * A sample to hold until its thread comes back: its arrays copied, as the reader's buffers they view (a decompressed
 * window, a callchain slab) are reused by the records read meanwhile.
 */
function held(sample: SampleEvent): SampleEvent {
  return {
    ...sample,
    callchain: sample.callchain?.slice(),
    ...(sample.userRegs && { userRegs: { ...sample.userRegs, values: sample.userRegs.values.slice() } }),
    ...(sample.userStack && { userStack: sample.userStack.slice() }),
  };
}

/** Folds `folder`'s perf.data by time off the CPU (see the top of this file), in a read of its own. */
export async function foldOffCpu(
  folder: OutputFolder,
  options: OffCpuFoldOptions,
  context: { signal?: AbortSignal; warn: Warn; resolver?: FrameResolver },
): Promise<OffCpuFold> {
  const reading = await offCpuReading(folder, options, context);
  await readPerfDataFile(`${folder.path}/${layout.perfData}`, reading.handlers, {
    signal: context.signal,
    name: layout.perfData,
  });
  return reading.finish();
}

/**
 * The off-CPU fold as handlers of a read of the folder's perf.data, and what it gives once the read is over: for a
 * read that makes the CPU profile too (the built-in engine's), so that the recording is read and decompressed once.
 * The handlers take every event, after the other reader is done with it (they copy what they hold).
 */
export async function offCpuReading(
  folder: OutputFolder,
  options: OffCpuFoldOptions,
  context: { warn: Warn; resolver?: FrameResolver },
): Promise<{ handlers: ReadHandlers; finish: () => Promise<OffCpuFold> }> {
  const { warn } = context;
  const fold = { ...options.fold, eventFilter: switchEvent, weight: 'period' as const };
  const stackFolder = new StackFolder(fold, warn, context.resolver);
  const sink = new FoldSink(stackFolder);
  const pairing = new SwitchPairing<SampleEvent>();
  const intervals = { blocked: 0, preempted: 0, open: 0, short: 0, unheld: 0 };
  const heldBytes = new Map<number, number>();
  let heldTotal = 0;
  // Thread names, for the time spent runnable (bounded as the pairing's threads).
  const comms = new Map<number, string>();
  const runnableNs = new Map<number, number>();
  let cpuUsPerSample: number | undefined;
  const release = (tid: number) => {
    heldTotal -= heldBytes.get(tid) ?? 0;
    heldBytes.delete(tid);
  };
  const minNs = (options.minBlockUs ?? 0) * 1000;
  const pids = options.pids;
  const copies = await mapsToPlace(folder, warn);
  let writer: ScriptTextWriter | undefined;
  let switchAttr = -1;
  let last = 0;
  const write = async (sample: SampleEvent, ns: number, preempted: boolean, open: boolean) => {
    if (preempted && !options.preempted) {
      runnableNs.set(sample.tid, (runnableNs.get(sample.tid) ?? 0) + ns);
      return void intervals.preempted++;
    }
    // Under half a microsecond it would weigh 0, which the fold takes for no period (a weight of 1).
    if (ns < minNs || ns < 500) return void intervals.short++;
    sample.period = Math.round(ns / 1000);
    if (open) intervals.open++;
    else intervals.blocked++;
    await writer!.event(sample);
  };
  const handlers: ReadHandlers = {
    async header(header) {
      switchAttr = header.attrs.findIndex((attr) => attr.name === switchEvent);
      const cpu = offCpuRecording(header);
      const cpuAttr = cpu && header.attrs.find((attr) => attr.name === cpu.cpuEvent);
      cpuUsPerSample = cpuAttr && microsecondsPerSample(cpuAttr);
      const perfMaps = new PerfMaps(folder, { copies, hostFiles: recordedHere(header) }, warn);
      const symbols = await builtinEngineSymbols(folder, header, perfMaps, warn, { demangle: true });
      writer = new ScriptTextWriter(symbols, sink, { periodAlways: true });
      await writer.header(header);
    },
    async event(event) {
      if (event.time !== undefined) last = Math.max(last, Number(event.time));
      if (event.kind === 'sample') {
        if (event.attr !== switchAttr || event.time === undefined || (pids && !pids.has(event.pid))) return;
        release(event.tid);
        const size = heldSize(event);
        if (heldTotal + size > (options.maxHeldBytes ?? maxHeldBytes)) {
          intervals.unheld++;
          pairing.drop(event.tid);
          return;
        }
        heldBytes.set(event.tid, size);
        heldTotal += size;
        pairing.switchedOut(event.pid, event.tid, Number(event.time), held(event));
        return;
      }
      if (event.kind === 'comm' && (comms.size < 1 << 20 || comms.has(event.tid))) comms.set(event.tid, event.comm);
      if (event.kind === 'switch') {
        if (event.time === undefined || (pids && !pids.has(event.pid))) return;
        const interval = pairing.switched(event.tid, event.out, event.preempted, Number(event.time));
        if (!interval) return;
        release(event.tid);
        await write(interval.stack, interval.ns, interval.preempted, false);
        return;
      }
      await writer!.event(event);
    },
  };
  const finish = async (): Promise<OffCpuFold> => {
    for (const interval of pairing.finish(last)) await write(interval.stack, interval.ns, interval.preempted, true);
    const unwound = writer && writer.unwound.samples > 0 ? writer.unwound : undefined;
    // Preempted stretches the recording took no sample of (it samples blocking switches only) are left out too.
    intervals.preempted += pairing.counts.preemptedUnsampled;
    const runnableUs = new Map<string, number>();
    for (const byTid of [runnableNs, pairing.runnableNs])
      for (const [tid, ns] of byTid) {
        const name = rootFrameName(comms.get(tid) ?? `[thread ${tid}]`);
        runnableUs.set(name, (runnableUs.get(name) ?? 0) + ns / 1000);
      }
    return {
      fold: stackFolder.end(),
      intervals,
      unpaired: pairing.counts,
      ...(unwound && { unwound }),
      runnableUs,
      ...(cpuUsPerSample !== undefined && { cpuUsPerSample }),
    };
  };
  return { handlers, finish };
}

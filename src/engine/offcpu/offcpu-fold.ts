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
import { mergeFoldResults, rootFrameName, StackFolder, type FoldOptions, type FoldResult } from '../../stacks/fold.js';
import type { FoldedStacks } from '../../stacks/folded.js';
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
export function offCpuRecording(
  header: Pick<PerfDataHeader, 'attrs'> & { features?: Pick<PerfDataHeader['features'], 'cmdline'> },
): { cpuEvent: string; switchWindows: boolean } | undefined {
  const { attrs } = header;
  if (!attrs.some((attr) => attr.name === switchEvent) || !attrs.some((attr) => attr.contextSwitch)) return undefined;
  const cpu = attrs.find((attr) => attr.name !== switchEvent && !isDummyEvent(attr));
  if (cpu?.name === undefined) return undefined;
  // perf's command line says whether the tracepoint was switched on and off (collect --switch-share): --control.
  const switchWindows = header.features?.cmdline?.some((arg) => arg.startsWith('--control')) ?? false;
  return { cpuEvent: cpu.name, switchWindows };
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
  /**
   * The recording took the switches' stacks in windows of time (collect --switch-share): each thread's stacks were
   * weighed to its whole time blocked, measured from its switch records (see weighToThreads).
   */
  switchWindows?: SwitchWindowFigures;
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
  /**
   * Fold as if the recording had taken the switches' stacks only in windows of time (collect --switch-share): the
   * switch samples at times (ns) `inWindow` refuses are left out, each thread's stacks weighed to its time blocked. To
   * check that estimate against the whole recording. Default: the recording as it is.
   */
  simulatedWindows?: { inWindow(timeNs: number): boolean };
}

/**
 * Text of one sample, as perf script prints it, for the fold (StackFolder.write parses it as perf script's): into the
 * `target`th of `folders` (the stretches of each length apart, with switch windows), the rest of the text into each.
 */
class FoldSink implements ScriptSink {
  target = 0;
  constructor(private readonly folders: readonly StackFolder[]) {}
  header(text: string): void {
    for (const folder of this.folders) folder.write(Buffer.from(text));
  }
  sample(header: string, frames: readonly ScriptFrame[], count: number): void {
    let text = `${header}\n`;
    for (let i = 0; i < count; i++) text += `${frames[i]!.line}\n`;
    this.folders[this.target]!.write(Buffer.from(`${text}\n`));
  }
  oneLine(text: string): void {
    for (const folder of this.folders) folder.write(Buffer.from(text));
  }
}

/**
 * With switch windows, stretches this long or longer are weighed apart from the shorter ones (weighToThreads by
 * length): a thread's rare long waits (idle, a timer) stand for its long time blocked, its many short ones for the
 * short, not one for the other.
 */
const longStretchNs = 100e6;

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
  let stackFolder = new StackFolder(fold, warn, context.resolver);
  let pairing = new SwitchPairing<SampleEvent>();
  // With switch windows: the long stretches' fold, and the microseconds of each thread's stretches written with a
  // stack, short and long.
  let longFolder: StackFolder | undefined;
  let sink = new FoldSink([stackFolder]);
  let sampledUs: [Map<number, number>, Map<number, number>] | undefined;
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
    if (sampledUs) {
      sink.target = ns >= longStretchNs ? 1 : 0;
      const sampled = sampledUs[sink.target]!;
      if (sampled.size < 1 << 20 || sampled.has(sample.tid))
        sampled.set(sample.tid, (sampled.get(sample.tid) ?? 0) + sample.period);
    }
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
      if (cpu?.switchWindows || options.simulatedWindows) {
        // Each thread's stacks apart, to be weighed to its own time blocked at the end.
        stackFolder = new StackFolder({ ...fold, includeTid: true }, warn, context.resolver);
        longFolder = new StackFolder({ ...fold, includeTid: true }, warn, context.resolver);
        sink = new FoldSink([stackFolder, longFolder]);
        pairing = new SwitchPairing<SampleEvent>({
          countUnsampled: true,
          minUnsampledNs: minNs,
          longNs: longStretchNs,
        });
        sampledUs = [new Map(), new Map()];
      }
      const perfMaps = new PerfMaps(folder, { copies, hostFiles: recordedHere(header) }, warn);
      const symbols = await builtinEngineSymbols(folder, header, perfMaps, warn, { demangle: true });
      writer = new ScriptTextWriter(symbols, sink, { periodAlways: true });
      await writer.header(header);
    },
    async event(event) {
      if (event.time !== undefined) last = Math.max(last, Number(event.time));
      if (event.kind === 'sample') {
        if (event.attr !== switchAttr || event.time === undefined || (pids && !pids.has(event.pid))) return;
        if (options.simulatedWindows && !options.simulatedWindows.inWindow(Number(event.time))) return;
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
      if (event.kind === 'exit') pairing.exited(event.tid);
      if (event.kind === 'fork') pairing.forked(event.tid);
      if (event.kind === 'switch') {
        if (event.time === undefined || (pids && !pids.has(event.pid))) return;
        const interval = pairing.switched(event.tid, event.out, event.preempted, Number(event.time), event.pid);
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
    const threadName = (tid: number) => rootFrameName(comms.get(tid) ?? `[thread ${tid}]`);
    const runnableUs = new Map<string, number>();
    for (const byTid of [runnableNs, pairing.runnableNs])
      for (const [tid, ns] of byTid) {
        const name = threadName(tid);
        runnableUs.set(name, (runnableUs.get(name) ?? 0) + ns / 1000);
      }
    let folded = stackFolder.end();
    let switchWindows: OffCpuFold['switchWindows'];
    if (sampledUs && longFolder) {
      const shortNs = new Map(
        [...pairing.unsampledNs].map(([tid, ns]) => [tid, ns - (pairing.unsampledLongNs.get(tid) ?? 0)]),
      );
      const { pidOf } = pairing;
      const parts = [
        weighToThreads(folded, options.fold, sampledUs[0], { unsampledNs: shortNs, pidOf }, threadName),
        weighToThreads(
          longFolder.end(),
          options.fold,
          sampledUs[1],
          { unsampledNs: pairing.unsampledLongNs, pidOf },
          threadName,
        ),
      ];
      folded = mergeFoldResults(parts.map((part) => part.fold));
      const [a, b] = parts.map((part) => part.switchWindows) as [SwitchWindowFigures, SwitchWindowFigures];
      switchWindows = {
        sampledUs: a.sampledUs + b.sampledUs,
        unsampledUs: a.unsampledUs + b.unsampledUs,
        threads: new Set([...sampledUs[0].keys(), ...sampledUs[1].keys(), ...pairing.unsampledNs.keys()]).size,
        unsampledThreads: a.unsampledThreads + b.unsampledThreads,
      };
    }
    return {
      fold: folded,
      ...(switchWindows && { switchWindows }),
      intervals,
      unpaired: pairing.counts,
      ...(unwound && { unwound }),
      runnableUs,
      ...(cpuUsPerSample !== undefined && { cpuUsPerSample }),
    };
  };
  return { handlers, finish };
}

/**
 * µs blocked with a stack taken and without; threads; and threads whose stretches of a length (short or long) had no
 * stack at all, shown under unsampledFrame.
 */
export interface SwitchWindowFigures {
  sampledUs: number;
  unsampledUs: number;
  threads: number;
  unsampledThreads: number;
}

/** A root frame of a fold made with includeTid: the thread's name, its process and its own id. */
const tidRootPattern = /^(.*)-(\d+|\?)\/(\d+)$/;

/**
 * The off-CPU fold of a recording that took the switches' stacks in windows of time only (collect --switch-share,
 * random windows, so that which stretches have a stack does not follow the program's own rhythm): each thread's
 * stretches with a stack stand for all its time blocked, which its switch records measure whole. Folded by thread
 * (`fold`, made with includeTid), each stack's microseconds are multiplied by its thread's time blocked over the time
 * of its stretches with a stack, and its root frame spelled back as `options` asks; a thread none of whose stretches
 * fell in a window shows its time under `[blocked: stack not sampled]`. Each thread's total is then what it was; the
 * shares of its stacks are estimates (a ratio estimator, per thread).
 */
export function weighToThreads(
  fold: FoldResult,
  options: Partial<FoldOptions>,
  sampledUs: ReadonlyMap<number, number>,
  pairing: Pick<SwitchPairing<unknown>, 'unsampledNs' | 'pidOf'>,
  threadName: (tid: number) => string,
): { fold: FoldResult; switchWindows: SwitchWindowFigures } {
  const rootOf = (name: string, pid: string, tid: string) =>
    options.includeTid ? `${name}-${pid}/${tid}` : options.includePid ? `${name}-${pid}` : name;
  const restack = (stack: string): { stack: string; factor: number } => {
    const cut = stack.indexOf(';');
    const match = tidRootPattern.exec(cut < 0 ? stack : stack.slice(0, cut));
    if (!match) return { stack, factor: 1 };
    const [, name, pid, tid] = match as unknown as [string, string, string, string];
    const sampled = sampledUs.get(Number(tid)) ?? 0;
    const unsampled = (pairing.unsampledNs.get(Number(tid)) ?? 0) / 1000;
    const factor = sampled > 0 ? (sampled + unsampled) / sampled : 1;
    return { stack: rootOf(name, pid, tid) + (cut < 0 ? '' : stack.slice(cut)), factor };
  };
  const stacks: FoldedStacks = new Map();
  let weight = 0;
  const add = (stack: string, us: number) => {
    if (us <= 0) return;
    stacks.set(stack, (stacks.get(stack) ?? 0) + us);
    weight += us;
  };
  for (const [stack, us] of fold.stacks) {
    const { stack: named, factor } = restack(stack);
    add(named, Math.round(us * factor));
  }
  let unsampledUs = 0;
  let unsampledThreads = 0;
  for (const [tid, ns] of pairing.unsampledNs) {
    unsampledUs += ns / 1000;
    if ((sampledUs.get(tid) ?? 0) > 0) continue;
    unsampledThreads++;
    const pid = pairing.pidOf.get(tid);
    const root = rootOf(threadName(tid), pid === undefined || pid < 0 ? '?' : String(pid), String(tid));
    add(`${root};${unsampledFrame}`, Math.round(ns / 1000));
  }
  const addressed = fold.addressed.map((part) => {
    const { stack, factor } = restack(part.stack);
    return { ...part, stack, weight: Math.round(part.weight * factor) };
  });
  let sampled = 0;
  for (const us of sampledUs.values()) sampled += us;
  return {
    fold: { ...fold, stacks, weight, addressed },
    switchWindows: {
      sampledUs: sampled,
      unsampledUs: Math.round(unsampledUs),
      threads: new Set([...sampledUs.keys(), ...pairing.unsampledNs.keys()]).size,
      unsampledThreads,
    },
  };
}

/** The frame under which a thread's time blocked shows when none of its stretches fell in a window (weighToThreads). */
export const unsampledFrame = '[blocked: stack not sampled]';

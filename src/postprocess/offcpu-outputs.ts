// The off-CPU outputs of a recording made with `collect --off-cpu` (src/engine/offcpu/): the folded stacks weighed in
// microseconds off the CPU, the flame graphs in milliseconds blocked with the cool palette (managed, native and kernel
// frames still told apart), speedscope in microseconds, pprof in nanoseconds; the wall-clock view beside them (each thread's time running,
// blocked and waiting for a CPU); and the figures the manifest and the summary give: time blocked, stretches kept and
// left out, switch records with no partner, the heaviest blocking stacks, each kind of thread's three times.
import type { OffCpuFold } from '../engine/offcpu/offcpu-fold.js';
import { layout } from '../output/layout.js';
import type { PartialOutputs } from '../output/partial-outputs.js';
import { renderHtml } from '../render/html.js';
import { renderSpeedscope } from '../render/speedscope.js';
import { renderPprof, type PprofOptions } from '../render/pprof.js';
import { renderSvg } from '../render/svg.js';
import { timePprofOptions, type PprofFolderFacts } from './pprof-options.js';
import { formatFolded, inSortedOrder, type FoldedStacks } from '../stacks/folded.js';
import type { AddressedStack } from '../stacks/fold.js';

export interface OffCpuOptions {
  /** Stretches off the CPU shorter than this are left out, counted. Default 1 µs (collect's --min-block). */
  minBlockUs: number;
  /** Fold the time threads waited for a CPU (preempted) too. Default false: time blocked only. */
  preempted: boolean;
}

const microsecondsPer: Record<string, number> = { us: 1, µs: 1, ms: 1000, s: 1_000_000 };

/**
 * A minimum block time as users write it (`--min-block`, a watch rule's minBlock): `500us`, `2ms`, `0.5s` or a bare
 * number of microseconds, to microseconds; undefined when it is not a time (or over an hour).
 */
export function minBlockMicroseconds(text: string): number | undefined {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?\s*$/.exec(text);
  const us = match ? Number(match[1]) * microsecondsPer[match[2] ?? 'us']! : Number.NaN;
  return Number.isFinite(us) && us <= 3_600_000_000 ? us : undefined;
}

export const defaultOffCpuOptions: Readonly<OffCpuOptions> = Object.freeze({ minBlockUs: 1, preempted: false });

/** The manifest's `offCpu`. */
export interface OffCpuReport {
  /**
   * What the stretches were measured from: the switch tracepoint's samples paired with the kernel's switch records
   * (perf's own --off-cpu, BPF, is not used: Debian's perf is built without it).
   */
  source: 'sched_switch';
  /** Microseconds off the CPU folded, all threads together. */
  blockedUs: number;
  minBlockUs: number;
  preempted: boolean;
  intervals: OffCpuFold['intervals'];
  unpaired: OffCpuFold['unpaired'];
  distinctStacks: number;
  /** How the switches' stack copies were unwound (mixed unwinding): ends reached, copies too short. */
  unwound?: OffCpuFold['unwound'];
  /**
   * The stacks were taken in windows of time (collect --switch-share): µs blocked with a stack and without, and each
   * thread's stacks weighed to its whole time blocked.
   */
  switchWindows?: OffCpuFold['switchWindows'];
  /** The heaviest stacks, root first, with their microseconds. */
  top: { stack: string; us: number }[];
  /**
   * Where each kind of thread's time went, µs: running (its CPU samples, as the time they stand for), blocked, and
   * runnable (waiting for a CPU); kinds by thread name, numbers dropped (`.NET_TP_Worker`, `wait-sleep`), heaviest
   * first. Absent when the CPU event's samples stand for no known time.
   */
  threads?: ThreadKind[];
}

export interface ThreadKind {
  kind: string;
  runningUs: number;
  blockedUs: number;
  runnableUs: number;
}

/** Thread kinds the manifest gives. */
const threadKinds = 16;

/** The frame that stands for a thread's time runnable, waiting for a CPU, in the wall-clock view. */
export const runnableFrame = '[runnable: waiting for a CPU]';

/** Stacks given in the manifest's `top`. */
const topStacks = 10;

export async function writeOffCpuOutputs(
  outputs: PartialOutputs,
  options: {
    /** The recording folded by time off the CPU (foldOffCpu, or offCpuReading alongside the CPU profile's read). */
    folded: OffCpuFold;
    offCpu: OffCpuOptions;
    title?: string;
    /** The CPU profile's folded stacks (samples), for the wall-clock view: none, no view. */
    cpuStacks?: FoldedStacks;
    /** What the folder's pprof profiles share (labels, build-ids); the CPU profile's native files by frame. */
    pprof: PprofFolderFacts;
    cpuFrameFiles?: ReadonlyMap<string, string>;
    /** The CPU profile's stacks by the addresses of their unnamed native frames (FoldResult.addressed). */
    cpuAddressed?: readonly AddressedStack[];
  },
  signal: AbortSignal | undefined,
  written: (name: string) => Promise<void>,
): Promise<OffCpuReport> {
  const { folded } = options;
  const stacks = inSortedOrder(folded.fold.stacks);
  const write = async (name: string, content: string | Uint8Array) => {
    signal?.throwIfAborted();
    await outputs.write(name, content);
    await written(name);
  };
  // The flame graphs count milliseconds: 12.5 ms reads better than 12,500 µs.
  const writeView = async (
    names: { folded: string; svg: string; html: string; speedscope: string; pprof: string },
    us: FoldedStacks,
    graph: { title: string; subtitle: string; countName: string; colors?: 'cool' },
    speedscopeName: string,
    pprof: Partial<PprofOptions>,
  ) => {
    await write(names.folded, [...formatFolded(us)].join(''));
    const ms = new Map([...us].map(([stack, weight]) => [stack, weight / 1000]));
    await write(names.svg, renderSvg(ms, graph));
    await write(names.html, renderHtml(ms, graph));
    await write(names.speedscope, renderSpeedscope(us, { name: speedscopeName, unit: 'microseconds' }));
    await write(names.pprof, renderPprof(us, pprof));
  };
  await writeView(
    {
      folded: layout.offCpuFolded,
      svg: layout.offCpuSvg,
      html: layout.offCpuHtml,
      speedscope: layout.offCpuSpeedscope,
      pprof: layout.offCpuPprof,
    },
    stacks,
    {
      title: options.title ?? 'Off-CPU Flame Graph',
      subtitle: 'time blocked, by the stack each thread left the CPU from',
      colors: 'cool',
      countName: 'ms blocked',
    },
    options.title ?? 'profcpu off-CPU',
    timePprofOptions('blocked', folded.fold, options.pprof),
  );
  const wall =
    folded.cpuUsPerSample === undefined || !options.cpuStacks
      ? undefined
      : wallClock({ stacks: options.cpuStacks, addressed: options.cpuAddressed ?? [] }, folded);
  if (wall)
    await writeView(
      {
        folded: layout.wallClockFolded,
        svg: layout.wallClockSvg,
        html: layout.wallClockHtml,
        speedscope: layout.wallClockSpeedscope,
        pprof: layout.wallClockPprof,
      },
      wall.stacks,
      {
        title: 'Wall-Clock Flame Graph',
        subtitle: 'each thread’s time running, blocked and waiting for a CPU',
        countName: 'ms',
      },
      'profcpu wall-clock',
      timePprofOptions(
        'wall',
        {
          frameFiles: new Map([...folded.fold.frameFiles, ...(options.cpuFrameFiles ?? [])]),
          addressed: wall.addressed,
        },
        options.pprof,
      ),
    );
  const top = [...stacks]
    .sort((a, b) => b[1] - a[1])
    .slice(0, topStacks)
    .map(([stack, us]) => ({ stack, us }));
  return {
    source: 'sched_switch',
    blockedUs: folded.fold.weight,
    minBlockUs: options.offCpu.minBlockUs,
    preempted: options.offCpu.preempted,
    intervals: folded.intervals,
    unpaired: folded.unpaired,
    ...(folded.switchWindows && { switchWindows: folded.switchWindows }),
    distinctStacks: stacks.size,
    ...(folded.unwound && { unwound: folded.unwound }),
    top,
    ...(wall && { threads: wall.kinds.slice(0, threadKinds) }),
  };
}

/**
 * How far the switches' stack copies took their stacks (mixed unwinding): a line of progress. A stack cut at the
 * copy's end shows under its outermost frame reached, not its thread's start; a larger copy reaches deeper waits.
 */
export function offCpuUnwoundNotice(unwound: NonNullable<OffCpuReport['unwound']>): string {
  const percent = (n: number) => `${((100 * n) / unwound.samples).toFixed(1)}%`;
  const cut = unwound.stops['outside-stack'] ?? 0;
  const parts = [`${percent(unwound.stops.end ?? 0)} to their thread's start`];
  if (cut > 0) parts.push(`${percent(cut)} cut at the end of the copy (collect --switch-stack-size copies more)`);
  return `off-CPU: unwound the stack copies of ${unwound.samples} switches: ${parts.join('; ')}`;
}

/**
 * The wall-clock view: the CPU profile's stacks weighed by the CPU time a sample stands for, the off-CPU stacks, and
 * each thread's time runnable under its name (with the parts of both told apart by address); and the time of each kind
 * of thread, split three ways.
 */
function wallClock(
  cpu: { stacks: FoldedStacks; addressed: readonly AddressedStack[] },
  off: OffCpuFold,
): { stacks: FoldedStacks; addressed: AddressedStack[]; kinds: ThreadKind[] } {
  const cpuStacks = cpu.stacks;
  const usPerSample = off.cpuUsPerSample!;
  const stacks = new Map<string, number>();
  const kinds = new Map<string, ThreadKind>();
  const kindOf = (stack: string) => {
    const thread = stack.slice(0, stack.includes(';') ? stack.indexOf(';') : undefined);
    const kind = thread.replace(/[_#-]?\d+$/, '') || thread;
    let entry = kinds.get(kind);
    if (!entry) kinds.set(kind, (entry = { kind, runningUs: 0, blockedUs: 0, runnableUs: 0 }));
    return entry;
  };
  const add = (stack: string, us: number) => stacks.set(stack, (stacks.get(stack) ?? 0) + us);
  for (const [stack, samples] of cpuStacks) {
    const us = Math.round(samples * usPerSample);
    add(stack, us);
    kindOf(stack).runningUs += us;
  }
  for (const [stack, us] of off.fold.stacks) {
    add(stack, us);
    kindOf(stack).blockedUs += us;
  }
  for (const [thread, us] of off.runnableUs) {
    const rounded = Math.round(us);
    if (rounded <= 0) continue;
    add(`${thread};${runnableFrame}`, rounded);
    kindOf(thread).runnableUs += rounded;
  }
  // A CPU stack's microseconds are rounded as a whole: each addressed part gets its share of them.
  const addressed = cpu.addressed.map((part) => {
    const samples = cpuStacks.get(part.stack) ?? 0;
    const us = samples > 0 ? (Math.round(samples * usPerSample) * part.weight) / samples : 0;
    return { ...part, weight: us };
  });
  addressed.push(...off.fold.addressed);
  const total = (k: ThreadKind) => k.runningUs + k.blockedUs + k.runnableUs;
  return {
    stacks: inSortedOrder(stacks),
    addressed,
    kinds: [...kinds.values()].sort((a, b) => total(b) - total(a)),
  };
}

// The off-CPU outputs of a recording made with `collect --off-cpu` (src/engine/offcpu/): the folded stacks weighed in
// microseconds off the CPU, the flame graphs in milliseconds blocked with the cool palette (managed, native and kernel
// frames still told apart), speedscope in microseconds; and the figures the manifest and the summary give: time
// blocked, stretches kept and left out, switch records with no partner, the heaviest blocking stacks.
import type { Warn } from '../diagnostics.js';
import type { OutputFolder } from '../files/output-folder.js';
import { foldOffCpu, type OffCpuFold } from '../engine/offcpu/offcpu-fold.js';
import { layout } from './../output/layout.js';
import type { PartialOutputs } from '../output/partial-outputs.js';
import { renderHtml } from '../render/html.js';
import { renderSpeedscope } from '../render/speedscope.js';
import { renderSvg } from '../render/svg.js';
import { formatFolded, inSortedOrder } from '../stacks/folded.js';
import type { FoldOptions, FrameResolver } from '../stacks/fold.js';

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
  /** Microseconds off the CPU folded, all threads together. */
  blockedUs: number;
  minBlockUs: number;
  preempted: boolean;
  intervals: OffCpuFold['intervals'];
  unpaired: OffCpuFold['unpaired'];
  distinctStacks: number;
  /** How the switches' stack copies were unwound (mixed unwinding): ends reached, copies too short. */
  unwound?: OffCpuFold['unwound'];
  /** The heaviest stacks, root first, with their microseconds. */
  top: { stack: string; us: number }[];
}

/** Stacks given in the manifest's `top`. */
const topStacks = 10;

export async function writeOffCpuOutputs(
  folder: OutputFolder,
  outputs: PartialOutputs,
  options: { offCpu: OffCpuOptions; fold: Partial<FoldOptions>; pids: ReadonlySet<number> | undefined; title?: string },
  context: { signal: AbortSignal | undefined; warn: Warn; resolver: FrameResolver | undefined },
  written: (name: string) => Promise<void>,
): Promise<OffCpuReport> {
  const { signal } = context;
  const folded = await foldOffCpu(
    folder,
    {
      fold: options.fold,
      minBlockUs: options.offCpu.minBlockUs,
      preempted: options.offCpu.preempted,
      pids: options.pids,
    },
    context,
  );
  const stacks = inSortedOrder(folded.fold.stacks);
  const write = async (name: string, content: string) => {
    signal?.throwIfAborted();
    await outputs.write(name, content);
    await written(name);
  };
  await write(layout.offCpuFolded, [...formatFolded(stacks)].join(''));
  // The flame graphs count milliseconds: 12.5 ms reads better than 12,500 µs.
  const milliseconds = new Map([...stacks].map(([stack, us]) => [stack, us / 1000]));
  const graph = {
    title: options.title ?? 'Off-CPU Flame Graph',
    subtitle: 'time blocked, by the stack each thread left the CPU from',
    colors: 'cool',
    countName: 'ms blocked',
  } as const;
  await write(layout.offCpuSvg, renderSvg(milliseconds, graph));
  await write(layout.offCpuHtml, renderHtml(milliseconds, graph));
  await write(
    layout.offCpuSpeedscope,
    renderSpeedscope(stacks, { name: options.title ?? 'profcpu off-CPU', unit: 'microseconds' }),
  );
  const top = [...stacks]
    .sort((a, b) => b[1] - a[1])
    .slice(0, topStacks)
    .map(([stack, us]) => ({ stack, us }));
  return {
    blockedUs: folded.fold.weight,
    minBlockUs: options.offCpu.minBlockUs,
    preempted: options.offCpu.preempted,
    intervals: folded.intervals,
    unpaired: folded.unpaired,
    distinctStacks: stacks.size,
    ...(folded.unwound && { unwound: folded.unwound }),
    top,
  };
}

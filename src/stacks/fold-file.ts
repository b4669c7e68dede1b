// The fold stage's file shell: takes a path to `perf script` text, gives the FoldResult foldStream would. A large file (and no resolver, which cannot cross threads) is cut at sample boundaries (blank lines)
// into one range per worker thread; each folds its range and the results are merged, in file order, so the
// output is the same as folding on one thread. Workers run the built fold-worker.js (not the .ts source).
import { availableParallelism } from 'node:os';
import { stat } from 'node:fs/promises';
import { Worker } from 'node:worker_threads';
import { ignoreWarnings, type Warn } from '../diagnostics.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { readRange, readWindow } from './file-range.js';
import {
  foldStream,
  mergeFoldResults,
  otherEventMessage,
  StackFolder,
  type FoldOptions,
  type FoldResult,
  type FrameResolver,
} from './fold.js';
import type { FoldWorkerInput, FoldWorkerOutput } from './fold-worker.js';

export interface FoldFileOptions {
  /**
   * Worker threads for a large file; 1 folds on the calling thread. Default: one less than the machine's
   * parallelism, 1 to 8 (on a 2-core machine shared with perf and the app, two workers measured slower than one
   * thread: scripts/bench/fold.ts).
   */
  threads: number;
  /** Files smaller than this many bytes are folded on the calling thread. Default 64 MiB. */
  parallelThreshold: number;
  /** Stops the fold (workers are terminated); the promise then rejects with ABORTED. Default none. */
  signal: AbortSignal | undefined;
}

export const defaultFoldFileOptions: Readonly<FoldFileOptions> = Object.freeze({
  threads: Math.max(1, Math.min(8, availableParallelism() - 1)),
  parallelThreshold: 64 * 1024 * 1024,
  signal: undefined,
});

/** How far past a cut point a blank line is looked for; perf samples are far shorter. */
const BOUNDARY_WINDOW = 1 << 20;

export async function foldFile(
  path: string,
  options: Partial<FoldOptions> = {},
  warn: Warn = ignoreWarnings,
  resolver?: FrameResolver,
  fileOptions: Partial<FoldFileOptions> = {},
): Promise<FoldResult> {
  const settings = { ...defaultFoldFileOptions, ...fileOptions };
  try {
    settings.signal?.throwIfAborted();
    return await foldFileIn(path, options, warn, resolver, settings);
  } catch (cause) {
    if (isProfcpuError(cause)) throw cause;
    if ((cause as Error).name === 'AbortError') throw new ProfcpuError('ABORTED', 'folding was interrupted', { cause });
    throw new ProfcpuError('IO', `cannot read ${path}: ${(cause as Error).message}`, {
      remedy: 'Check the path, or pipe `perf script` output into `profcpu fold -`.',
      cause,
    });
  }
}

async function foldFileIn(
  path: string,
  options: Partial<FoldOptions>,
  warn: Warn,
  resolver: FrameResolver | undefined,
  { threads, parallelThreshold, signal }: FoldFileOptions,
): Promise<FoldResult> {
  const size = (await stat(path)).size;
  // Workers need the built module: run from the TypeScript source (tsx), this folds on one thread.
  const built = import.meta.url.endsWith('.js');
  if (threads <= 1 || size < parallelThreshold || resolver !== undefined || !built) {
    return foldStream(readRange(path, 0, size, signal), options, warn, resolver);
  }
  const eventFilter = options.eventFilter || (await firstEvent(path, options));
  // Without an event in the first MiB the "first event seen" could lie anywhere: fold on one thread.
  if (eventFilter === undefined) return foldStream(readRange(path, 0, size, signal), options, warn, resolver);
  const cuts = await sampleBoundaries(path, size, threads);
  const outputs = await Promise.all(
    cuts
      .slice(0, -1)
      .map((start, i) => runWorker({ path, start, end: cuts[i + 1]!, options: { ...options, eventFilter } }, signal)),
  );
  const merged = mergeFoldResults(outputs.map((o) => o.result));
  const warned = new Set<string>();
  for (const { warnings } of outputs) {
    for (const [kind, message] of warnings) {
      if (!warned.has(kind)) warn(message);
      warned.add(kind);
    }
  }
  if (!options.eventFilter && merged.skipped['other-event']) {
    warn(otherEventMessage(eventFilter, merged.events.find((e) => e !== eventFilter) ?? 'another'));
  }
  return merged;
}

/** The first event the file names, found by folding its first MiB, or undefined. */
async function firstEvent(path: string, options: Partial<FoldOptions>): Promise<string | undefined> {
  const probe = new StackFolder(options);
  probe.write(await readWindow(path, 0, BOUNDARY_WINDOW));
  return probe.end().events[0];
}

/** Offsets 0 < cut… < size where ranges start: each just after a blank line near size·k/threads. */
async function sampleBoundaries(path: string, size: number, threads: number): Promise<number[]> {
  const cuts = [0];
  for (let k = 1; k < threads; k++) {
    const target = Math.max(Math.floor((size * k) / threads), cuts[cuts.length - 1]!);
    const window = await readWindow(path, target, BOUNDARY_WINDOW);
    const cut = afterBlankLine(window);
    if (cut >= 0 && target + cut < size) cuts.push(target + cut);
  }
  cuts.push(size);
  return cuts;
}

/** The offset just after the first blank line (LF or CRLF) in `buf`, or -1. */
function afterBlankLine(buf: Buffer): number {
  const lf = buf.indexOf('\n\n');
  const crlf = buf.indexOf('\n\r\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) return crlf + 3;
  return lf >= 0 ? lf + 2 : -1;
}

function runWorker(input: FoldWorkerInput, signal: AbortSignal | undefined): Promise<FoldWorkerOutput & { ok: true }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL('./fold-worker.js', import.meta.url), { workerData: input });
    const onAbort = () => {
      void worker.terminate();
      reject(new ProfcpuError('ABORTED', 'folding was interrupted'));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const settle = () => signal?.removeEventListener('abort', onAbort);
    worker.once('message', (output: FoldWorkerOutput) => {
      settle();
      void worker.terminate();
      if (output.ok) resolve(output);
      else
        reject(new ProfcpuError('IO', `cannot fold ${input.path}: ${output.message}`, { remedy: 'Check the file.' }));
    });
    worker.once('error', (cause) => {
      settle();
      reject(cause);
    });
  });
}

// Worker-thread entry of foldFile (fold-file.ts): folds bytes [start, end) of a file, which begin and end at
// sample boundaries, and posts the result and its warnings back. Runs only as a worker.
import { parentPort, workerData } from 'node:worker_threads';
import { StackFolder, type FoldOptions, type FoldResult } from './fold.js';
import { readRange } from './file-range.js';

export interface FoldWorkerInput {
  path: string;
  start: number;
  /** Exclusive. */
  end: number;
  options: Partial<FoldOptions>;
}

export type FoldWorkerOutput =
  { ok: true; result: FoldResult; warnings: (readonly [string, string])[] } | { ok: false; message: string };

async function foldRange(input: FoldWorkerInput): Promise<FoldWorkerOutput> {
  const folder = new StackFolder(input.options);
  for await (const chunk of readRange(input.path, input.start, input.end)) folder.write(chunk);
  const result = folder.end();
  return { ok: true, result, warnings: [...folder.firstWarnings()] };
}

if (parentPort) {
  const port = parentPort;
  foldRange(workerData as FoldWorkerInput).then(
    (output) => port.postMessage(output),
    (error: unknown) => port.postMessage({ ok: false, message: (error as Error).message } satisfies FoldWorkerOutput),
  );
}

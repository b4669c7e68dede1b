// Worker-thread entry of output-hash.ts: SHA-256 off the main thread, for several jobs of one run, each named by a
// number: one file's bytes as they are written (`update` messages, each a buffer handed over and handed back once
// hashed, then `end`), or files read whole (`files`, as manifest.ts's hashFiles reads them). Runs only as a worker.
import { createHash, type Hash } from 'node:crypto';
import { parentPort } from 'node:worker_threads';
import { hashFiles, type ManifestFile } from './manifest.js';

export type HashRequest =
  | { op: 'update'; job: number; buffer: ArrayBuffer; length: number }
  | { op: 'end'; job: number }
  | { op: 'files'; job: number; dir: string; paths: string[] };

export type HashReply =
  | { op: 'buffer'; job: number; buffer: ArrayBuffer }
  | { op: 'digest'; job: number; bytes: number; sha256: string }
  | { op: 'files'; job: number; files: ManifestFile[] }
  | { op: 'failed'; job: number; message: string; code: string | undefined };

if (parentPort) {
  const port = parentPort;
  const hashes = new Map<number, { hash: Hash; bytes: number }>();
  port.on('message', (request: HashRequest) => {
    const { job } = request;
    if (request.op === 'update') {
      let state = hashes.get(job);
      if (!state) hashes.set(job, (state = { hash: createHash('sha256'), bytes: 0 }));
      state.hash.update(new Uint8Array(request.buffer, 0, request.length));
      state.bytes += request.length;
      port.postMessage({ op: 'buffer', job, buffer: request.buffer } satisfies HashReply, [request.buffer]);
    } else if (request.op === 'end') {
      const state = hashes.get(job) ?? { hash: createHash('sha256'), bytes: 0 };
      hashes.delete(job);
      port.postMessage({ op: 'digest', job, bytes: state.bytes, sha256: state.hash.digest('hex') } satisfies HashReply);
    } else {
      hashFiles(request.dir, request.paths).then(
        (files) => port.postMessage({ op: 'files', job, files } satisfies HashReply),
        (error: unknown) => {
          const { message, code } = error as NodeJS.ErrnoException;
          port.postMessage({ op: 'failed', job, message, code } satisfies HashReply);
        },
      );
    }
  });
}

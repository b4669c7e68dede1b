// Worker-thread entry of output-hash.ts: SHA-256 off the main thread, of one file's bytes as they are written
// (`update` messages, each a buffer handed over and handed back once hashed, then `end`) or of files read whole
// (`files`, as manifest.ts's hashFiles reads them). Runs only as a worker; one job per worker.
import { parentPort } from 'node:worker_threads';
import { createHash } from 'node:crypto';
import { hashFiles, type ManifestFile } from '../bundle/manifest.js';

export type HashRequest =
  { op: 'update'; buffer: ArrayBuffer; length: number } | { op: 'end' } | { op: 'files'; dir: string; paths: string[] };

export type HashReply =
  | { op: 'buffer'; buffer: ArrayBuffer }
  | { op: 'digest'; bytes: number; sha256: string }
  | { op: 'files'; files: ManifestFile[] }
  | { op: 'failed'; message: string; code: string | undefined };

if (parentPort) {
  const port = parentPort;
  const hash = createHash('sha256');
  let bytes = 0;
  port.on('message', (request: HashRequest) => {
    if (request.op === 'update') {
      hash.update(new Uint8Array(request.buffer, 0, request.length));
      bytes += request.length;
      port.postMessage({ op: 'buffer', buffer: request.buffer } satisfies HashReply, [request.buffer]);
    } else if (request.op === 'end') {
      port.postMessage({ op: 'digest', bytes, sha256: hash.digest('hex') } satisfies HashReply);
    } else {
      hashFiles(request.dir, request.paths).then(
        (files) => port.postMessage({ op: 'files', files } satisfies HashReply),
        (error: unknown) => {
          const { message, code } = error as NodeJS.ErrnoException;
          port.postMessage({ op: 'failed', message, code } satisfies HashReply);
        },
      );
    }
  });
}

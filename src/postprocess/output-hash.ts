// SHA-256 for the manifest, off the main thread (hash-worker.ts): of an output as it is written, so that the manifest
// need not read the file back (flamescope/perf_script.out: 142 MB at 100k samples), and of the raw data while the
// samples are read. The main thread only hands buffers over: a written buffer goes to the worker and comes back to a
// small pool, from which the writer takes its next one.
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { hashFiles, type ManifestFile } from '../bundle/manifest.js';
import { ProfcpuError } from '../error.js';
import type { HashReply, HashRequest } from './hash-worker.js';

/** What the manifest says of a file: its size and SHA-256. */
export interface ContentHash {
  bytes: number;
  sha256: string;
}

/** Buffers at the worker at most: past it, the writer waits for one to come back. */
const maxAtWorker = 8;
/** Buffers kept for reuse. */
const maxPooled = 4;

/** Workers need the built module: run from the TypeScript source (tsx), the hashing is done on the calling thread. */
const built = import.meta.url.endsWith('.js');

function startWorker(): Worker {
  return new Worker(new URL('./hash-worker.js', import.meta.url));
}

/**
 * The hash of one file's bytes, given in order by the code writing it, which takes its buffers from here. The worker
 * stops once the digest is given, or at close().
 */
export class ContentHasher {
  private readonly worker = built ? startWorker() : undefined;
  /** Without a worker: the hash, taken here. */
  private readonly inline = built ? undefined : createHash('sha256');
  private inlineBytes = 0;
  private readonly pool: ArrayBuffer[] = [];
  private atWorker = 0;
  private waiting: (() => void) | undefined;
  private failure: Error | undefined;
  private ended = false;
  private readonly result: Promise<ContentHash>;
  private settle!: { resolve: (hash: ContentHash) => void; reject: (error: Error) => void };

  constructor() {
    this.result = new Promise<ContentHash>((resolve, reject) => (this.settle = { resolve, reject }));
    this.result.catch(() => {});
    if (!this.worker) return;
    this.worker.on('message', (reply: HashReply) => {
      if (reply.op === 'buffer') {
        this.atWorker--;
        if (this.pool.length < maxPooled) this.pool.push(reply.buffer);
        this.wake();
      } else if (reply.op === 'digest') {
        this.settle.resolve({ bytes: reply.bytes, sha256: reply.sha256 });
        this.close();
      }
    });
    this.worker.on('error', (error) => this.fail(error));
    this.worker.on('exit', () => this.fail(new Error('the hash worker stopped')));
  }

  /** A buffer of at least `size` bytes for the writer, from the pool when one is big enough. */
  buffer(size: number): Buffer {
    const pooled = this.pool.findIndex((b) => b.byteLength >= size);
    // Its own ArrayBuffer (not a slice of Node's pool), whole, as it is handed to the worker whole.
    return pooled >= 0 ? Buffer.from(this.pool.splice(pooled, 1)[0]!) : Buffer.allocUnsafeSlow(size);
  }

  /** Hashes the first `length` bytes of `buffer`, which came from buffer(): the caller no longer uses it. */
  update(buffer: Buffer, length: number): void {
    if (this.failure || this.ended) return;
    if (this.inline) {
      this.inline.update(buffer.subarray(0, length));
      this.inlineBytes += length;
      if (this.pool.length < maxPooled) this.pool.push(buffer.buffer as ArrayBuffer);
      return;
    }
    this.atWorker++;
    const request: HashRequest = { op: 'update', buffer: buffer.buffer as ArrayBuffer, length };
    this.worker!.postMessage(request, [request.buffer]);
  }

  /** Resolves once the worker holds few enough buffers to be given more (undefined when it does now). */
  room(): Promise<void> | undefined {
    if (this.atWorker < maxAtWorker || this.failure) return undefined;
    return new Promise<void>((wake) => (this.waiting = wake)).then(() => this.room());
  }

  /**
   * The size and hash of every byte given; call it once all are. Rejects when the worker failed: the caller can read
   * the file back instead.
   */
  digest(): Promise<ContentHash> {
    if (!this.ended && this.inline) this.settle.resolve({ bytes: this.inlineBytes, sha256: this.inline.digest('hex') });
    else if (!this.ended && !this.failure) this.worker!.postMessage({ op: 'end' } satisfies HashRequest);
    this.ended = true;
    return this.result;
  }

  /** Stops the worker (a digest not given by then is never given). */
  close(): void {
    void this.worker?.terminate();
  }

  private fail(error: Error): void {
    this.failure ??= error;
    this.settle.reject(error);
    this.wake();
  }

  private wake(): void {
    const wake = this.waiting;
    this.waiting = undefined;
    wake?.();
  }
}

/** manifest.ts's hashFiles(dir, paths), read and hashed on a worker thread. */
export function hashFilesOffThread(dir: string, paths: string[], signal?: AbortSignal): Promise<ManifestFile[]> {
  if (!built) return hashFiles(dir, paths, signal);
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const worker = startWorker();
    let settled = false;
    const done = (error: Error | undefined, files?: ManifestFile[]) => {
      if (settled) return;
      settled = true;
      signal?.removeEventListener('abort', onAbort);
      void worker.terminate();
      if (error) reject(error);
      else resolve(files!);
    };
    const onAbort = () => done(new ProfcpuError('ABORTED', 'hashing was interrupted'));
    signal?.addEventListener('abort', onAbort, { once: true });
    worker.on('message', (reply: HashReply) => {
      if (reply.op === 'files') done(undefined, reply.files);
      else if (reply.op === 'failed') done(Object.assign(new Error(reply.message), { code: reply.code }));
    });
    worker.on('error', (error) => done(error));
    worker.on('exit', () => done(new Error('the hash worker stopped')));
    worker.postMessage({ op: 'files', dir, paths } satisfies HashRequest);
  });
}

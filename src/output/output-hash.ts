// SHA-256 for the manifest, off the main thread, on one worker per run (hash-worker.ts): of an output as it is
// written, so that the manifest need not read the file back (flamescope/perf_script.out: 142 MB at 100k samples), and
// of the raw data while the samples are read. The main thread only hands buffers over: a written buffer goes to the
// worker and comes back to a small pool, from which the writer takes its next one. From the TypeScript source (tsx)
// workers cannot run: the same hashes are then taken on the calling thread.
import { createHash } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { hashFiles, type ManifestFile } from './manifest.js';
import { ProfcpuError } from '../error.js';
import type { HashReply, HashRequest } from './hash-worker.js';

/** What the manifest says of a file: its size and SHA-256. */
export interface ContentHash {
  bytes: number;
  sha256: string;
}

/** Buffers of one writer at the worker at most: past it, the writer waits for one to come back. */
const maxAtWorker = 4;
/**
 * The size of the writer's buffers with a worker: each costs a message there and one back (0.25-0.8 ms of the main
 * thread each on a busy machine, measured), so fewer and larger than the 1 MiB the writer takes otherwise.
 */
const workerBufferBytes = 4 << 20;
/** Buffers kept for reuse by one writer. */
const maxPooled = 4;

/** Workers need the built module (as in fold-file.ts). */
const built = import.meta.url.endsWith('.js');

type Job = { reply(reply: HashReply): void; fail(error: Error): void };

/**
 * The run's hash worker, started on first use; close() stops it and fails the jobs left. Without `offThread` (or run
 * from the source) it hashes on the calling thread instead.
 */
export class HashWorker {
  private worker: Worker | undefined;
  private readonly jobs = new Map<number, Job>();
  private nextJob = 0;
  private closed = false;
  private readonly threaded: boolean;

  constructor(offThread: boolean) {
    this.threaded = offThread && built;
  }

  /** A hasher for one file's bytes, given by its writer. */
  contentHasher(): ContentHasher {
    return new ContentHasher(this.threaded ? this : undefined);
  }

  /** manifest.ts's hashFiles(dir, paths), read and hashed on the worker. */
  hashFiles(dir: string, paths: string[], signal?: AbortSignal): Promise<ManifestFile[]> {
    if (this.closed) return Promise.reject(new Error('the hash worker was stopped'));
    if (!this.threaded) return hashFiles(dir, paths, signal);
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        this.jobs.delete(job);
        reject(new ProfcpuError('ABORTED', 'hashing was interrupted'));
      };
      const job = this.start({
        reply: (reply) => {
          signal?.removeEventListener('abort', onAbort);
          if (reply.op === 'files') resolve(reply.files);
          else if (reply.op === 'failed') reject(Object.assign(new Error(reply.message), { code: reply.code }));
        },
        fail: (error) => {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      });
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      this.post({ op: 'files', job, dir, paths });
    });
  }

  close(): void {
    this.closed = true;
    void this.worker?.terminate();
    this.failAll(new Error('the hash worker was stopped'));
  }

  /** Registers a job (its replies, until one ends it, go to `job.reply`); gives its number. */
  start(job: Job): number {
    const id = this.nextJob++;
    if (this.closed) job.fail(new Error('the hash worker was stopped'));
    else this.jobs.set(id, job);
    return id;
  }

  /** Ends a job: its later replies, if any, are dropped. */
  finish(id: number): void {
    this.jobs.delete(id);
  }

  post(request: HashRequest, transfer?: ArrayBuffer[]): void {
    if (!this.jobs.has(request.job)) return;
    this.running().postMessage(request, transfer);
  }

  private running(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(new URL('./hash-worker.js', import.meta.url));
    worker.on('message', (reply: HashReply) => this.jobs.get(reply.job)?.reply(reply));
    worker.on('error', (error) => this.failAll(error));
    worker.on('exit', () => this.failAll(new Error('the hash worker stopped')));
    return (this.worker = worker);
  }

  private failAll(error: Error): void {
    const jobs = [...this.jobs.values()];
    this.jobs.clear();
    for (const job of jobs) job.fail(error);
  }
}

/** The hash of one file's bytes, given in order by the code writing it, which takes its buffers from here. */
export class ContentHasher {
  /** Without a worker: the hash, taken here. */
  private readonly inline: ReturnType<typeof createHash> | undefined;
  private inlineBytes = 0;
  private readonly job: number;
  private readonly pool: ArrayBuffer[] = [];
  private atWorker = 0;
  private waiting: (() => void) | undefined;
  private failed = false;
  private ended = false;
  private readonly result: Promise<ContentHash>;
  private settle!: { resolve: (hash: ContentHash) => void; reject: (error: Error) => void };

  /** The size of buffer the writer had best take (undefined: its own choice). */
  readonly bufferBytes: number | undefined;

  /** With no worker, hashes on the calling thread. */
  constructor(private readonly worker: HashWorker | undefined) {
    this.bufferBytes = worker ? workerBufferBytes : undefined;
    this.result = new Promise<ContentHash>((resolve, reject) => (this.settle = { resolve, reject }));
    this.result.catch(() => {});
    this.inline = worker ? undefined : createHash('sha256');
    this.job =
      worker?.start({
        reply: (reply) => {
          if (reply.op === 'buffer') {
            this.atWorker--;
            if (this.pool.length < maxPooled) this.pool.push(reply.buffer);
            this.wake();
          } else if (reply.op === 'digest') {
            worker.finish(this.job);
            this.settle.resolve({ bytes: reply.bytes, sha256: reply.sha256 });
          }
        },
        fail: (error) => {
          this.failed = true;
          this.settle.reject(error);
          this.wake();
        },
      }) ?? -1;
  }

  /** A buffer of at least `size` bytes for the writer, from the pool when one is big enough. */
  buffer(size: number): Buffer {
    const pooled = this.pool.findIndex((b) => b.byteLength >= size);
    // Its own ArrayBuffer (not a slice of Node's pool), whole, as it is handed to the worker whole.
    return pooled >= 0 ? Buffer.from(this.pool.splice(pooled, 1)[0]!) : Buffer.allocUnsafeSlow(size);
  }

  /** Hashes the first `length` bytes of `buffer`, which came from buffer(): the caller no longer uses it. */
  update(buffer: Buffer, length: number): void {
    if (this.failed || this.ended) return;
    const whole = buffer.buffer as ArrayBuffer;
    if (this.inline) {
      this.inline.update(buffer.subarray(0, length));
      this.inlineBytes += length;
      if (this.pool.length < maxPooled) this.pool.push(whole);
      return;
    }
    this.atWorker++;
    this.worker!.post({ op: 'update', job: this.job, buffer: whole, length }, [whole]);
  }

  /**
   * The size and hash of `bytes`, all the file holds: given to the worker when `own` (the caller no longer uses them)
   * and they are large and a whole ArrayBuffer; hashed here otherwise.
   */
  whole(bytes: Uint8Array, own: boolean): Promise<ContentHash> {
    const { buffer } = bytes;
    const handOver =
      own &&
      this.worker !== undefined &&
      bytes.length >= 1 << 20 &&
      buffer instanceof ArrayBuffer &&
      bytes.byteOffset === 0 &&
      buffer.byteLength === bytes.length;
    if (!handOver) {
      this.ended = true;
      this.worker?.finish(this.job);
      return Promise.resolve({ bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') });
    }
    this.update(Buffer.from(buffer), bytes.length);
    return this.digest();
  }

  /** Resolves once the worker holds few enough buffers to be given more (undefined when it does now). */
  room(): Promise<void> | undefined {
    if (this.atWorker < maxAtWorker || this.failed) return undefined;
    return new Promise<void>((wake) => (this.waiting = wake)).then(() => this.room());
  }

  /**
   * The size and hash of every byte given; call it once all are. Rejects when the worker failed: the caller can read
   * the file back instead.
   */
  digest(): Promise<ContentHash> {
    if (!this.ended && this.inline) this.settle.resolve({ bytes: this.inlineBytes, sha256: this.inline.digest('hex') });
    else if (!this.ended) this.worker!.post({ op: 'end', job: this.job });
    this.ended = true;
    return this.result;
  }

  private wake(): void {
    const wake = this.waiting;
    this.waiting = undefined;
    wake?.();
  }
}

// Events in the order perf script delivers them (tools/perf/util/ordered-events.c): each record with a time is queued;
// at every FINISHED_ROUND record the queue delivers, sorted by time (ties in arrival order), the events no later than
// the latest time seen when the previous round ended, since perf record wrote every CPU's buffer between the two; the
// rest is delivered at the end. Records without a time (or time 0, as perf's synthesized mappings) bypass the queue.
// The queue is bounded: past `maxQueued` events, or past `maxQueuedBytes` held by them (a buffer counted once however
// many events share it: a sample's callchain is a view of the chunk read, or part of a slab), it delivers its earlier
// half, as perf does when its memory runs out.
import { limits } from './format.js';
import type { PerfTime } from './records.js';

/** What an event holds: no buffer, one, or two (a sample's callchain and its user stack, often one chunk). */
export type HeldBuffers =
  ArrayBufferLike | readonly [ArrayBufferLike | undefined, ArrayBufferLike | undefined] | undefined;

interface Queued<T> {
  time: PerfTime;
  seq: number;
  event: T;
}

export class TimeOrder<T> {
  private queue: Queued<T>[] = [];
  private sorted = true;
  private seq = 0;
  private maxTime: PerfTime = 0;
  private nextFlush: PerfTime = 0;

  /** How many queued events hold each buffer, and the bytes of those buffers. */
  private readonly held = new Map<ArrayBufferLike, number>();
  private heldBytes = 0;

  constructor(
    private readonly deliver: (event: T) => void | Promise<void>,
    private readonly maxQueued = limits.maxQueued,
    /** The buffers an event keeps alive while queued, if any (one, or two that may be the same). */
    private readonly holds: (event: T) => HeldBuffers = () => undefined,
    private readonly maxQueuedBytes = limits.maxQueuedBytes,
  ) {}

  /** Queues (or delivers) an event; a promise only when a delivery has to be waited for. */
  push(time: PerfTime | undefined, event: T): void | Promise<void> {
    // A time is a number while it is exact, so 2^64 - 1 is a bigint; a caller may still give 0 as either.
    if (time === undefined || time === 0 || time === 0n || time === 0xffffffffffffffffn) return this.deliver(event);
    const last = this.queue[this.queue.length - 1];
    if (last && time < last.time) this.sorted = false;
    this.queue.push({ time, seq: this.seq++, event });
    this.hold(event, 1);
    if (time > this.maxTime) this.maxTime = time;
    if (this.queue.length >= this.maxQueued || this.heldBytes > this.maxQueuedBytes)
      return this.flushUpTo(this.queue[this.queue.length >> 1]!.time, true);
  }

  /** A FINISHED_ROUND record. */
  async round(): Promise<void> {
    await this.flushUpTo(this.nextFlush, false);
    this.nextFlush = this.maxTime;
  }

  /** The end of the data: everything left. */
  async finish(): Promise<void> {
    this.sort();
    const rest = this.queue;
    this.queue = [];
    for (const queued of rest) {
      this.hold(queued.event, -1);
      await this.deliver(queued.event);
    }
  }

  get length(): number {
    return this.queue.length;
  }

  private sort(): void {
    if (this.sorted) return;
    // Numbers and bigints compare exactly with each other.
    this.queue.sort((a, b) => (a.time < b.time ? -1 : a.time > b.time ? 1 : a.seq - b.seq));
    this.sorted = true;
  }

  private async flushUpTo(limit: PerfTime, strictlyBefore: boolean): Promise<void> {
    this.sort();
    let n = 0;
    while (n < this.queue.length && (strictlyBefore ? this.queue[n]!.time < limit : this.queue[n]!.time <= limit)) n++;
    // A half flush where every queued time is equal still has to make room.
    if (strictlyBefore && n === 0) n = this.queue.length >> 1 || this.queue.length;
    const done = this.queue.slice(0, n);
    this.queue = this.queue.slice(n);
    for (const queued of done) {
      this.hold(queued.event, -1);
      const delivered = this.deliver(queued.event);
      if (delivered) await delivered;
    }
  }

  /** Counts an event holding its buffer (+1) or letting it go (-1); a buffer's bytes count while anyone holds it. */
  private hold(event: T, change: 1 | -1): void {
    const buffers = this.holds(event);
    if (!buffers) return;
    if (!Array.isArray(buffers)) return this.holdBuffer(buffers as ArrayBufferLike, change);
    const [first, second] = buffers as readonly [ArrayBufferLike | undefined, ArrayBufferLike | undefined];
    if (first) this.holdBuffer(first, change);
    if (second && second !== first) this.holdBuffer(second, change);
  }

  private holdBuffer(buffer: ArrayBufferLike, change: 1 | -1): void {
    const before = this.held.get(buffer) ?? 0;
    const after = before + change;
    if (after === 0) this.held.delete(buffer);
    else this.held.set(buffer, after);
    if (before === 0) this.heldBytes += buffer.byteLength;
    if (after === 0) this.heldBytes -= buffer.byteLength;
  }
}

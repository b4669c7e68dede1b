// The time-ordering queue of the perf.data reader, on a hostile order: samples far in the future, each sharing a
// callchain slab with many near ones, and no round to deliver them. The queue must bound the bytes its events hold
// (each slab counted once), not only their number: a queued sample keeps its whole slab alive.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TimeOrder } from '../../../src/engine/perf-data/order.js';

interface Event {
  time: bigint;
  chain: BigUint64Array;
}

test('samples far in the future, one per slab: the slabs the queue holds stay under its byte bound', async () => {
  const slabBytes = 512 * 1024;
  const maxQueuedBytes = 16 * slabBytes;
  const held = new Map<ArrayBufferLike, number>();
  let most = 0;
  const order = new TimeOrder<Event>(
    (event) => {
      const count = held.get(event.chain.buffer)! - 1;
      if (count === 0) held.delete(event.chain.buffer);
      else held.set(event.chain.buffer, count);
    },
    1 << 18,
    (event) => event.chain.buffer,
    maxQueuedBytes,
  );
  for (let slab = 0; slab < 256; slab++) {
    // As CallchainSlab fills a slab: 64 samples of 1024 entries (delivered soon), then one far in the future.
    const buffer = new BigUint64Array(slabBytes / 8);
    for (let i = 0; i <= 64; i++) {
      const time = i < 64 ? BigInt(slab * 100 + i + 1) : 1n << 60n;
      const event = { time, chain: buffer.subarray(i * 1000, i * 1000 + 1000) };
      held.set(buffer.buffer, (held.get(buffer.buffer) ?? 0) + 1);
      await order.push(time, event);
      most = Math.max(most, held.size * slabBytes);
    }
  }
  await order.finish();
  assert.equal(held.size, 0);
  // One slab more than the bound: the push that passes it is delivered with the half.
  assert.ok(most <= maxQueuedBytes + slabBytes, `the queue held ${most / slabBytes} slabs`);
});

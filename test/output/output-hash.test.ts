// The hashes the manifest takes as outputs are written (output-hash.ts), on the worker thread of the built module and
// on the calling thread from the source: the same sizes and SHA-256 as node:crypto over the whole bytes, and as
// manifest.ts's hashFiles reading the files back, with more buffers in flight than the worker holds at once; a
// stopped worker fails what is left instead of hanging.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { hashFiles } from '../../src/output/manifest.js';
import { HashWorker } from '../../src/output/output-hash.js';
import { need } from '../support/requirements.js';

// Worker threads run the built module (dist/), as the CLI does.
const built = new URL('../../dist/output/output-hash.js', import.meta.url);

async function modules(t: TestContext): Promise<[string, typeof HashWorker][]> {
  const all: [string, typeof HashWorker][] = [['source, calling thread', HashWorker]];
  if (need(t, existsSync(built), 'the build in dist/ (npm run build)'))
    all.push(['built, worker thread', ((await import(built.href)) as { HashWorker: typeof HashWorker }).HashWorker]);
  return all;
}

test('a written file hashed as it is written: the size and SHA-256 of its bytes', async (t) => {
  for (const [label, Worker] of await modules(t)) {
    const hashing = new Worker(true);
    try {
      const hasher = hashing.contentHasher();
      const whole = createHash('sha256');
      let bytes = 0;
      // More buffers than the worker may hold at once (room() waits), of sizes past the first one's.
      for (let i = 0; i < 40; i++) {
        const buffer = hasher.buffer(i % 7 === 6 ? 3 << 20 : 1 << 16);
        const length = Math.min(buffer.length, 1000 + i * 997);
        buffer.fill(i * 31, 0, length);
        whole.update(buffer.subarray(0, length));
        bytes += length;
        hasher.update(buffer, length);
        await hasher.room();
      }
      assert.deepEqual(await hasher.digest(), { bytes, sha256: whole.digest('hex') }, label);
      const empty = hashing.contentHasher();
      assert.deepEqual(await empty.digest(), { bytes: 0, sha256: createHash('sha256').digest('hex') }, label);
    } finally {
      hashing.close();
    }
  }
});

test('files hashed as manifest.ts reads them; a stopped worker fails the jobs given it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-output-hash-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'a.data'), Buffer.alloc(5 << 20, 7));
  writeFileSync(join(dir, 'b.txt'), 'b\n');
  const expected = await hashFiles(dir, ['a.data', 'b.txt']);
  for (const [label, Worker] of await modules(t)) {
    const hashing = new Worker(true);
    assert.deepEqual(await hashing.hashFiles(dir, ['a.data', 'b.txt']), expected, label);
    await assert.rejects(hashing.hashFiles(dir, ['missing']), { code: 'ENOENT' }, label);
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(hashing.hashFiles(dir, ['a.data'], aborted.signal), label);
    hashing.close();
    await assert.rejects(hashing.hashFiles(dir, ['a.data']), label);
  }
});

test('a file written whole: hashed on the worker when its bytes are handed over, where they lie otherwise', async (t) => {
  for (const [label, Worker] of await modules(t)) {
    const hashing = new Worker(true);
    try {
      const big = Buffer.from('x'.repeat(3 << 20));
      const expected = { bytes: big.length, sha256: createHash('sha256').update(big).digest('hex') };
      const kept = Buffer.from(big);
      // Not handed over: the caller's bytes stay usable.
      assert.deepEqual(await hashing.contentHasher().whole(kept, false), expected, label);
      assert.equal(kept.length, 3 << 20, label);
      assert.deepEqual(await hashing.contentHasher().whole(big, true), expected, label);
      // Handed over to the worker, the bytes left this thread.
      if (label.startsWith('built')) assert.equal(big.length, 0, label);
      const small = Buffer.from('small\n');
      const smallHash = { bytes: small.length, sha256: createHash('sha256').update(small).digest('hex') };
      assert.deepEqual(await hashing.contentHasher().whole(small, true), smallHash, label);
    } finally {
      hashing.close();
    }
  }
});

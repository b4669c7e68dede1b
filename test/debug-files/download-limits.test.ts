// SymbolFetcher against loopback servers that keep a download alive without finishing it: a body trickled one byte
// every half second (the rate rule), a body that keeps pace but never ends and an answer that never comes (the overall
// deadline), retries that would run past the deadline. Small option values keep each case to a second or two; each
// test has a timeout of its own, so a regression fails instead of hanging the run.
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { SymbolFetcher, type SymbolFetchOptions } from '../../src/debug-files/symbol-server-fetch.js';
import { ssqpDebugKey, type SymbolServer } from '../../src/debug-files/symbol-server.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { startDownloadServer, type DownloadServer } from '../support/download-server.js';
import { startStaticServer, type StaticServer } from '../support/static-server.js';

let work: string;
let lib: NativeLib | undefined;
let paced: DownloadServer;
/** An empty store, for its `hang` and `status` faults. */
let store: StaticServer;
let run = 0;
const someId = 'ab'.repeat(20);
/** Generous next to the bounds asserted, small next to what a hang would take. */
const hostile = { timeout: 15_000 };

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-download-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
  paced = await startDownloadServer();
  store = await startStaticServer(join(work, 'empty'));
});
after(async () => {
  await paced.close();
  await store.close();
  rmSync(work, { recursive: true, force: true });
});

/** A fetcher with a cache of its own against `server`, the warnings it gave, and servers with no scripts left. */
function fetcher(server: { url: string }, options: Partial<SymbolFetchOptions>) {
  const warnings: string[] = [];
  const cacheDir = join(work, `cache-${++run}`);
  for (const s of [paced, store]) s.requests.length = 0;
  paced.scripts.clear();
  store.faults.clear();
  const servers: SymbolServer[] = [{ kind: 'ssqp', url: server.url, origin: 'test' }];
  const f = new SymbolFetcher({ servers, cacheDir, retryDelayMs: 10, warn: (m) => warnings.push(m), ...options });
  return { f, cacheDir, warnings };
}

/** The one failed attempt of a fetch, and how long the fetch took. */
async function failure(f: SymbolFetcher, buildId = someId) {
  const started = performance.now();
  const result = await f.fetch(buildId);
  const ms = Math.round(performance.now() - started);
  assert.equal(result.status, 'failed', JSON.stringify(result));
  assert.equal(result.attempts.length, 1);
  assert.equal(result.attempts[0]!.outcome, 'failed');
  return { reason: result.attempts[0]!.reason ?? '', ms };
}

function assertNoTemporaries(cacheDir: string) {
  const tmp = join(cacheDir, 'tmp');
  assert.deepEqual(existsSync(tmp) ? readdirSync(tmp) : [], [], 'temporary files left behind');
}

test(
  'a server trickling one byte every 0.5 s fails on the rate rule soon after the grace time, not retried',
  hostile,
  async (t) => {
    const { f, cacheDir, warnings } = fetcher(paced, {
      minRateGraceMs: 1000,
      minBytesPerSecond: 1024,
      idleTimeoutMs: 5000,
      totalTimeoutMs: 60_000,
      retries: 2,
    });
    paced.scripts.set('*', { kind: 'paced', body: new Uint8Array(1 << 20), chunkBytes: 1, everyMs: 500 });
    const { reason, ms } = await failure(f);
    t.diagnostic(`trickle failed after ${ms} ms`);
    assert.match(reason, /^too slow: [1-3] bytes in 1(\.\d)? s, under the minimum of 1024 bytes\/s$/);
    assert.ok(ms >= 950 && ms < 3000, `${ms} ms`);
    assert.equal(paced.requests.length, 1);
    assert.equal(warnings.length, 1);
    assertNoTemporaries(cacheDir);
  },
);

test('a body that keeps above the rate arrives whole, under a deadline too long for one timer', hostile, async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const body = readFileSync(l.debug);
  const { f } = fetcher(paced, {
    minRateGraceMs: 200,
    minBytesPerSecond: 1024,
    // Past setTimeout's 24.8-day limit, where Node would fire at once.
    totalTimeoutMs: 30 * 24 * 60 * 60 * 1000,
  });
  paced.scripts.set('*', { kind: 'paced', body, chunkBytes: Math.ceil(body.length / 6), everyMs: 100 });
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded', JSON.stringify(result.attempts));
  assert.deepEqual(readFileSync(result.path!), body);
  assert.deepEqual(paced.requests, [`/${ssqpDebugKey(l.buildId)}`]);
});

test('the overall deadline ends a body that keeps pace but never ends, without a retry', hostile, async (t) => {
  const { f, cacheDir } = fetcher(paced, { minBytesPerSecond: 0, idleTimeoutMs: 5000, totalTimeoutMs: 1500 });
  paced.scripts.set('*', { kind: 'paced', body: new Uint8Array(100 << 10), chunkBytes: 1024, everyMs: 100 });
  const { reason, ms } = await failure(f);
  t.diagnostic(`deadline reached after ${ms} ms`);
  assert.match(reason, /^not finished within 1\.5 s \(\d+ bytes received\)$/);
  assert.ok(ms >= 1450 && ms < 3500, `${ms} ms`);
  assert.equal(paced.requests.length, 1);
  assertNoTemporaries(cacheDir);
});

test('the overall deadline ends a wait for an answer longer than the answer timeout', hostile, async () => {
  const { f } = fetcher(store, { answerTimeoutMs: 60_000, totalTimeoutMs: 800 });
  store.faults.set('*', { kind: 'hang' });
  const { reason, ms } = await failure(f);
  assert.equal(reason, 'not finished within 0.8 s (0 bytes received)');
  assert.ok(ms < 2500, `${ms} ms`);
  assert.equal(store.requests.length, 1);
});

test('retries stop when the next one would start past the deadline', hostile, async () => {
  // Attempts at 0 and 400 ms; the third would start at 1200 ms, past the 1000 ms deadline.
  const { f } = fetcher(store, { retries: 5, retryDelayMs: 400, totalTimeoutMs: 1000 });
  store.faults.set('*', { kind: 'status', status: 500 });
  const { reason, ms } = await failure(f);
  assert.equal(reason, 'HTTP 500, after 2 attempts');
  assert.equal(store.requests.length, 2);
  assert.ok(ms < 1500, `${ms} ms`);
});

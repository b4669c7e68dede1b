// SymbolFetcher against real servers on loopback: elfutils' debuginfod indexing debug files built here, and a static
// HTTP server holding the same files in SSQP layout, with faults switched on per request path.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { SymbolFetcher, type SymbolFetchOptions } from '../../src/debug-files/symbol-server-fetch.js';
import { ssqpDebugKey, type SymbolServer } from '../../src/debug-files/symbol-server.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { serveDebugFile } from '../support/debuginfod.js';
import { needCommand } from '../support/requirements.js';
import { startStaticServer, type StaticServer } from '../support/static-server.js';

let work: string;
let lib: NativeLib | undefined;
/** A second library: its debug file is the "wrong file" a server may hold under lib's key. */
let other: { debug: string; buildId: string } | undefined;
let store: StaticServer;
let ssqp: SymbolServer;
let run = 0;
/** A loopback port nobody listens on. */
let closedPort: number;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-fetch-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
  if (lib) {
    other = buildOther(join(work, 'other'));
    const key = join(work, 'store', ssqpDebugKey(lib.buildId));
    mkdirSync(dirname(key), { recursive: true });
    copyFileSync(lib.debug, key);
    const wrongKey = join(work, 'store', 'wrong', ssqpDebugKey(lib.buildId));
    mkdirSync(dirname(wrongKey), { recursive: true });
    copyFileSync(other.debug, wrongKey);
  }
  store = await startStaticServer(join(work, 'store'));
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  closedPort = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  ssqp = { kind: 'ssqp', url: store.url, origin: 'test' };
});
after(async () => {
  await store.close();
  rmSync(work, { recursive: true, force: true });
});

/** Another library with a build-id of its own. */
function buildOther(dir: string) {
  mkdirSync(dir, { recursive: true });
  const so = join(dir, 'libother.so');
  execFileSync('gcc', ['-shared', '-fPIC', '-g', '-x', 'c', '-', '-o', so, '-Wl,--build-id=sha1'], {
    input: 'int profcpu_other(int x) { return x * 3; }\n',
  });
  execFileSync('objcopy', ['--only-keep-debug', so, `${so}.debug`]);
  const buildId = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', so], { encoding: 'utf8' }))![1]!;
  return { debug: `${so}.debug`, buildId };
}

/** A fetcher with a cache of its own, quick retries, and the warnings it gave. */
function fetcher(servers: SymbolServer[], options: Partial<SymbolFetchOptions> = {}) {
  const warnings: string[] = [];
  const cacheDir = join(work, `cache-${++run}`);
  store.requests.length = 0;
  store.faults.clear();
  const f = new SymbolFetcher({
    servers,
    cacheDir,
    retryDelayMs: 10,
    warn: (m) => warnings.push(m),
    ...options,
  });
  return { f, cacheDir, warnings };
}

/** Nothing half-written: no temporary left, no file under the build-id. */
function assertNothingCached(cacheDir: string, buildId: string) {
  const tmp = join(cacheDir, 'tmp');
  assert.deepEqual(existsSync(tmp) ? readdirSync(tmp) : [], [], 'temporary files left behind');
  assert.equal(existsSync(join(cacheDir, buildId.slice(0, 2))), false, 'a file was cached');
}

test('from an SSQP store: downloaded, verified, cached; the next request is served by the cache', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const { f, cacheDir, warnings } = fetcher([ssqp]);
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded');
  assert.equal(result.server, store.url);
  assert.equal(result.bytes, readFileSync(l.debug).length);
  assert.deepEqual(readFileSync(result.path!), readFileSync(l.debug));
  assert.equal(result.path, join(cacheDir, l.buildId.slice(0, 2), `${l.buildId.slice(2)}.debug`));
  assert.deepEqual(store.requests, [`/${ssqpDebugKey(l.buildId)}`]);
  const again = await f.fetch(l.buildId);
  assert.deepEqual([again.status, again.path], ['cached', result.path]);
  assert.equal(store.requests.length, 1);
  assert.deepEqual(readdirSync(join(cacheDir, 'tmp')), []);
  assert.deepEqual(warnings, []);
});

test('from a real debuginfod server, after a server that does not have it', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l || !needCommand(t, 'debuginfod', 'debuginfod')) return;
  const server = await serveDebugFile(l.debug, l.buildId, work);
  t.after(() => server.close());
  const empty: SymbolServer = { kind: 'ssqp', url: `${store.url}/empty`, origin: 'test' };
  const dbg: SymbolServer = { kind: 'debuginfod', url: server.url, origin: 'test' };
  const { f } = fetcher([empty, dbg]);
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded');
  assert.equal(result.server, server.url);
  assert.deepEqual(readFileSync(result.path!), readFileSync(l.debug));
  assert.deepEqual(
    result.attempts.map((a) => [a.url, a.outcome, a.reason]),
    [
      [`${store.url}/empty/${ssqpDebugKey(l.buildId)}`, 'not-found', 'HTTP 404'],
      [`${server.url}/buildid/${l.buildId}/debuginfo`, 'found', undefined],
    ],
  );
  // debuginfod's own 404 for an id it does not know.
  const missing = await f.fetch('00'.repeat(20));
  assert.equal(missing.status, 'not-found');
  assert.equal(missing.attempts[1]?.reason, 'HTTP 404');
});

test('a server that gzips the body anyway: decoded, and its Content-Length not taken for the file size', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const { f, warnings } = fetcher([ssqp]);
  store.faults.set('*', { kind: 'gzip' });
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded', JSON.stringify(result.attempts));
  assert.deepEqual(readFileSync(result.path!), readFileSync(l.debug));
  assert.deepEqual(warnings, []);
});

test('concurrent requests for one build-id share one download', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const { f } = fetcher([ssqp]);
  const results = await Promise.all([f.fetch(l.buildId), f.fetch(l.buildId), f.fetch(l.buildId)]);
  assert.deepEqual(
    results.map((r) => r.status),
    ['downloaded', 'downloaded', 'downloaded'],
  );
  assert.equal(store.requests.length, 1);
});

test('a 404: one warning per server, remembered for the miss TTL, then asked again', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const empty: SymbolServer = { kind: 'ssqp', url: `${store.url}/empty`, origin: 'test' };
  const { f, cacheDir, warnings } = fetcher([empty]);
  assert.equal((await f.fetch(l.buildId)).status, 'not-found');
  const second = new SymbolFetcher({ servers: [empty], cacheDir });
  assert.equal((await second.fetch(l.buildId)).attempts[0]?.outcome, 'remembered-miss');
  assert.equal(store.requests.length, 1);
  const expired = new SymbolFetcher({ servers: [empty], cacheDir, missTtlMs: 0 });
  assert.equal((await expired.fetch(l.buildId)).attempts[0]?.outcome, 'not-found');
  assert.equal(store.requests.length, 2);
  // One warning per server however many ids miss there: a distro's libraries all do.
  assert.equal((await f.fetch('12'.repeat(20))).status, 'not-found');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, new RegExp(`has no debug file for ${l.buildId} \\(HTTP 404\\)`));
  assertNothingCached(cacheDir, l.buildId);
});

test('faults: each a warning with its reason and nothing half-written in the cache', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const key = `/${ssqpDebugKey(l.buildId)}`;
  const size = readFileSync(l.debug).length;
  const cases: {
    name: string;
    setup: (s: StaticServer) => void;
    options?: Partial<SymbolFetchOptions>;
    server?: SymbolServer;
    reason: RegExp;
    outcome: string;
    requests: number;
  }[] = [
    {
      name: 'HTTP 500, retried',
      setup: (s) => s.faults.set(key, { kind: 'status', status: 500 }),
      reason: /^HTTP 500, after 3 attempts$/,
      outcome: 'failed',
      requests: 3,
    },
    {
      name: 'HTTP 403, not retried',
      setup: (s) => s.faults.set(key, { kind: 'status', status: 403 }),
      reason: /^HTTP 403$/,
      outcome: 'failed',
      requests: 1,
    },
    {
      name: 'a server that never answers',
      setup: (s) => s.faults.set(key, { kind: 'hang' }),
      options: { answerTimeoutMs: 300, retries: 0 },
      reason: /^no answer within 0.3 s$/,
      outcome: 'failed',
      requests: 1,
    },
    {
      name: 'a truncated body',
      setup: (s) => s.faults.set(key, { kind: 'truncate', bytes: 1000 }),
      options: { retries: 1 },
      reason: /^body cut after 1000 (of \d+ )?bytes.*, after 2 attempts$/,
      outcome: 'failed',
      requests: 2,
    },
    {
      name: 'a file whose build-id does not match',
      setup: () => {},
      server: { kind: 'ssqp', url: `${store.url}/wrong`, origin: 'test' },
      reason: new RegExp(`^the file received has build-id ${other?.buildId}, not ${l.buildId}$`),
      outcome: 'rejected',
      requests: 1,
    },
    {
      name: 'an oversized body announced by Content-Length',
      setup: () => {},
      options: { maxBytes: size - 1 },
      reason: new RegExp(`^file larger than the ${size - 1}-byte limit \\(${size} bytes\\)$`),
      outcome: 'failed',
      requests: 1,
    },
    {
      name: 'an oversized body without Content-Length',
      setup: (s) => s.faults.set(key, { kind: 'no-length' }),
      options: { maxBytes: 1000 },
      reason: /^file larger than the 1000-byte limit \(\d+ bytes\)$/,
      outcome: 'failed',
      requests: 1,
    },
    {
      name: 'a port nobody listens on',
      setup: () => {},
      server: { kind: 'ssqp', url: `http://127.0.0.1:${closedPort}`, origin: 'test' },
      options: { retries: 0 },
      reason: /^cannot connect: fetch failed.*ECONNREFUSED/,
      outcome: 'failed',
      requests: 0,
    },
  ];
  for (const c of cases) {
    const { f, cacheDir, warnings } = fetcher([c.server ?? ssqp], c.options);
    c.setup(store);
    const result = await f.fetch(l.buildId);
    assert.equal(result.status, 'failed', c.name);
    assert.equal(result.attempts.length, 1, c.name);
    assert.equal(result.attempts[0]!.outcome, c.outcome, c.name);
    assert.match(result.attempts[0]!.reason ?? '', c.reason, c.name);
    assert.equal(warnings.length, 1, `${c.name}: ${warnings.join(' | ')}`);
    assert.ok(warnings[0]!.includes(result.attempts[0]!.reason!), `${c.name}: ${warnings[0]}`);
    assert.equal(store.requests.length, c.requests, c.name);
    assertNothingCached(cacheDir, l.buildId);
  }
});

test('an unreachable server is skipped for the rest of the run', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const dead: SymbolServer = { kind: 'ssqp', url: `http://127.0.0.1:${closedPort}`, origin: 'test' };
  const { f, warnings } = fetcher([dead, ssqp], { retries: 0 });
  assert.equal((await f.fetch('11'.repeat(20))).attempts[0]?.outcome, 'failed');
  const found = await f.fetch(l.buildId);
  assert.equal(found.status, 'downloaded');
  assert.equal(found.attempts[0]?.outcome, 'skipped');
  // One warning for the dead server (the first fetch), one for the 404 of the id the store lacks.
  assert.deepEqual(
    warnings.map((w) => /cannot connect|has no debug file/.exec(w)?.[0]),
    ['cannot connect', 'has no debug file'],
  );
});

test('progress is reported as a large body arrives', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const seen: number[] = [];
  const { f } = fetcher([ssqp], { progressEveryBytes: 1024, progress: (p) => seen.push(p.received) });
  const size = readFileSync(l.debug).length;
  await f.fetch(l.buildId);
  assert.ok(seen.length >= 2, `progress ${seen.join(',')}`);
  assert.equal(seen.at(-1), size);
  assert.deepEqual(
    [...seen].sort((a, b) => a - b),
    seen,
  );
});

test('aborting interrupts a download that hangs', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const controller = new AbortController();
  const { f, cacheDir } = fetcher([ssqp], { signal: controller.signal });
  store.faults.set('*', { kind: 'hang' });
  const pending = f.fetch(l.buildId);
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(pending, (e: unknown) => isProfcpuError(e, 'ABORTED'));
  assertNothingCached(cacheDir, l.buildId);
});

test('a cache that cannot be written is an IO error naming the folder and the remedy', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const notADir = join(work, 'a-file');
  writeFileSync(notADir, '');
  const f = new SymbolFetcher({ servers: [ssqp], cacheDir: join(notADir, 'cache') });
  await assert.rejects(
    f.fetch(l.buildId),
    (e: unknown) =>
      isProfcpuError(e, 'IO') && e.message.includes(join(notADir, 'cache')) && /--cache-dir/.test(e.remedy ?? ''),
  );
});

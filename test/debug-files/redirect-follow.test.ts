// Redirects from a symbol server, against loopback servers that send them: followed to another host and through a
// relative Location; refused, before any connection, when they change the scheme or leave http(s); stopped after five
// hops in a loop. redirectTarget alone for the https: to http: downgrade, which needs no TLS server to show.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { redirectTarget, SymbolFetcher, type SymbolFetchOptions } from '../../src/debug-files/symbol-server-fetch.js';
import { ssqpDebugKey, type SymbolServer } from '../../src/debug-files/symbol-server.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { startDownloadServer, type DownloadServer } from '../support/download-server.js';

let work: string;
let lib: NativeLib | undefined;
/** The server profcpu is told about, on 127.0.0.2. */
let first: DownloadServer;
/** Where redirects lead, on 127.0.0.1: another host. */
let second: DownloadServer;
let run = 0;
const someId = 'cd'.repeat(20);
const key = (id: string) => `/${ssqpDebugKey(id)}`;
/** Every case ends in well under a second; a regression that follows redirects for ever fails here instead. */
const bounded = { timeout: 10_000 };

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-redirect-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
  first = await startDownloadServer('127.0.0.2');
  second = await startDownloadServer('127.0.0.1');
});
after(async () => {
  await first.close();
  await second.close();
  rmSync(work, { recursive: true, force: true });
});

function fetcher(options: Partial<SymbolFetchOptions> = {}) {
  const warnings: string[] = [];
  for (const s of [first, second]) {
    s.requests.length = 0;
    s.scripts.clear();
  }
  const servers: SymbolServer[] = [{ kind: 'ssqp', url: first.url, origin: 'test' }];
  const cacheDir = join(work, `cache-${++run}`);
  const f = new SymbolFetcher({ servers, cacheDir, retryDelayMs: 10, warn: (m) => warnings.push(m), ...options });
  return { f, warnings };
}

/** The whole body at once. */
const body = (bytes: Uint8Array) => ({ kind: 'paced' as const, body: bytes, chunkBytes: bytes.length, everyMs: 1 });

test('a redirect to another http host is followed', bounded, async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const { f, warnings } = fetcher();
  first.scripts.set(key(l.buildId), { kind: 'redirect', location: `${second.url}/blobs/1`, status: 307 });
  second.scripts.set('/blobs/1', body(readFileSync(l.debug)));
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded', JSON.stringify(result.attempts));
  assert.equal(result.server, first.url);
  assert.deepEqual(readFileSync(result.path!), readFileSync(l.debug));
  assert.deepEqual([first.requests, second.requests], [[key(l.buildId)], ['/blobs/1']]);
  assert.deepEqual(warnings, []);
});

test('a relative Location is resolved against the URL that sent it', bounded, async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const { f } = fetcher();
  // key(id) is /_.debug/elf-buildid-sym-<id>/_.debug: `../moved/x` replaces its last two segments.
  const moved = `/_.debug/moved/x`;
  first.scripts.set(key(l.buildId), { kind: 'redirect', location: '../moved/x' });
  first.scripts.set(moved, { kind: 'redirect', location: `${second.url}/y`, status: 301 });
  second.scripts.set('/y', body(readFileSync(l.debug)));
  const result = await f.fetch(l.buildId);
  assert.equal(result.status, 'downloaded', JSON.stringify(result.attempts));
  assert.deepEqual([first.requests, second.requests], [[key(l.buildId), moved], ['/y']]);
});

test('a 404 at the end of a redirect is a miss that names where it was', bounded, async () => {
  const { f } = fetcher();
  first.scripts.set(key(someId), { kind: 'redirect', location: `${second.url}/gone` });
  const result = await f.fetch(someId);
  assert.equal(result.status, 'not-found');
  assert.equal(result.attempts[0]?.reason, `HTTP 404 from ${second.url}/gone`);
});

test('refused before connecting: a change of scheme, file:, ftp:, no Location; none retried', bounded, async () => {
  const cases: { location: string | undefined; reason: RegExp }[] = [
    {
      location: `https://127.0.0.1:${second.port}/x`,
      reason: /redirect to https:\/\/127\.0\.0\.1:\d+\/x refused: it changes the scheme from http: to https: \(give/,
    },
    { location: 'file:///etc/passwd', reason: /redirect to file: refused \(only http: and https: are followed\)$/ },
    { location: `ftp://127.0.0.1:${second.port}/x`, reason: /redirect to ftp: refused/ },
    { location: undefined, reason: /redirect without a Location$/ },
  ];
  for (const c of cases) {
    const { f, warnings } = fetcher({ retries: 2 });
    const connections = second.connections();
    first.scripts.set(key(someId), { kind: 'redirect', location: c.location });
    const result = await f.fetch(someId);
    assert.equal(result.status, 'failed', String(c.location));
    assert.equal(result.attempts[0]?.outcome, 'failed');
    const reason = result.attempts[0]?.reason ?? '';
    assert.ok(reason.startsWith(`HTTP 302 from ${first.url}${key(someId)}: `), reason);
    assert.match(reason, c.reason);
    assert.equal(first.requests.length, 1, `${c.location}: retried`);
    assert.equal(second.connections(), connections, `${c.location}: connected to the redirect's target`);
    assert.equal(warnings.length, 1);
  }
});

test('a loop of redirects stops after five hops', bounded, async () => {
  const { f } = fetcher({ retries: 2 });
  first.scripts.set(key(someId), { kind: 'redirect', location: key(someId) });
  const result = await f.fetch(someId);
  assert.equal(result.status, 'failed');
  assert.equal(result.attempts[0]?.reason, `more than 5 redirects (the last from ${first.url}${key(someId)})`);
  assert.equal(first.requests.length, 6);
});

test('redirectTarget: same scheme only, http(s) only, relative resolved, no credentials', () => {
  const refused = (from: string, location: string | null) => {
    const target = redirectTarget(from, location);
    return 'refused' in target ? target.refused : undefined;
  };
  const url = (from: string, location: string) => {
    const target = redirectTarget(from, location);
    return 'url' in target ? target.url : target.refused;
  };
  assert.match(
    refused('https://symbols.example/a/b', 'http://mirror.example/b') ?? '',
    /^redirect to http:\/\/mirror\.example\/b refused: it changes the scheme from https: to http:$/,
  );
  assert.match(refused('http://symbols.example/a', 'https://symbols.example/a') ?? '', /from http: to https:/);
  assert.equal(url('https://symbols.example/a/b/c', '../d?x=1'), 'https://symbols.example/a/d?x=1');
  assert.equal(url('https://symbols.example/a', '//cdn.example/blob'), 'https://cdn.example/blob');
  assert.equal(url('http://127.0.0.1:8080/a', 'http://other.example/b'), 'http://other.example/b');
  assert.match(refused('https://s.example/', 'data:text/plain,hi') ?? '', /^redirect to data: refused/);
  assert.match(refused('https://s.example/', 'https://user:pw@s.example/') ?? '', /credentials/);
  assert.match(refused('https://s.example/', 'http://[::1') ?? '', /invalid URL/);
  assert.equal(refused('https://s.example/', '  '), 'redirect without a Location');
  assert.equal(refused('https://s.example/', null), 'redirect without a Location');
});

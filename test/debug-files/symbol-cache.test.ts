import assert from 'node:assert/strict';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { defaultSymbolCacheDir, SymbolCache, VerificationError } from '../../src/debug-files/symbol-cache.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';

let work: string;
let lib: NativeLib | undefined;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-cache-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
});
after(() => rmSync(work, { recursive: true, force: true }));

test('the cache folder follows XDG_CACHE_HOME, else ~/.cache', () => {
  assert.equal(defaultSymbolCacheDir({ XDG_CACHE_HOME: '/var/cache/u' }, '/home/u'), '/var/cache/u/profcpu/symbols');
  assert.equal(defaultSymbolCacheDir({}, '/home/u'), '/home/u/.cache/profcpu/symbols');
  // The XDG spec ignores relative paths.
  assert.equal(defaultSymbolCacheDir({ XDG_CACHE_HOME: 'rel' }, '/home/u'), '/home/u/.cache/profcpu/symbols');
});

test('commit verifies the build-id, renames into place, and never leaves the temporary file', async (t) => {
  if (!needNativeLib(t, lib) || !lib) return;
  const cache = new SymbolCache(join(work, 'c1'));
  const temp = await cache.tempPath(lib.buildId);
  copyFileSync(lib.debug, temp);
  const path = await cache.commit(temp, lib.buildId);
  assert.equal(path, cache.pathOf(lib.buildId));
  assert.equal(await cache.lookup(lib.buildId), path);
  assert.equal(existsSync(temp), false);

  const wrongId = 'ab'.repeat(20);
  const wrong = await cache.tempPath(wrongId);
  copyFileSync(lib.debug, wrong);
  await assert.rejects(cache.commit(wrong, wrongId), (e: unknown) => e instanceof VerificationError);
  const html = await cache.tempPath(wrongId);
  writeFileSync(html, '<html>a login page</html>');
  await assert.rejects(
    cache.commit(html, wrongId),
    (e: unknown) => (e as Error).message === 'the file received: not a usable ELF file (no ELF magic)',
  );
  assert.equal(await cache.lookup(wrongId), undefined);
  assert.deepEqual(readdirSync(join(cache.dir, 'tmp')), []);
});

test('build-ids become paths only when they are hex', () => {
  const cache = new SymbolCache('/c');
  assert.equal(
    cache.pathOf('79945f51fb2612f13b7667a10a8fd29122664791'),
    '/c/79/945f51fb2612f13b7667a10a8fd29122664791.debug',
  );
  for (const bad of ['../../etc/passwd', 'ABCD', 'abc', ''])
    assert.throws(
      () => cache.pathOf(bad),
      (e: unknown) => isProfcpuError(e, 'BAD_INPUT'),
    );
});

test('misses are remembered per server until the TTL runs out; a damaged record means ask again', async () => {
  const cache = new SymbolCache(join(work, 'c2'));
  const id = 'cd'.repeat(20);
  await cache.recordMiss(id, 'http://a', 'HTTP 404', 1000);
  await cache.recordMiss(id, 'http://b', 'HTTP 410', 2000);
  assert.deepEqual(await cache.recentMiss(id, 'http://a', 500, 1400), { at: 1000, reason: 'HTTP 404' });
  assert.equal(await cache.recentMiss(id, 'http://a', 500, 1500), undefined);
  assert.deepEqual(await cache.recentMiss(id, 'http://b', 500, 2100), { at: 2000, reason: 'HTTP 410' });
  assert.equal(await cache.recentMiss(id, 'http://c', 500, 2100), undefined);
  writeFileSync(join(cache.dir, 'misses', `${id}.json`), '{"http://a": {"at": "x"');
  assert.equal(await cache.recentMiss(id, 'http://a', 1e12, 1400), undefined);
  assert.deepEqual(
    readdirSync(join(cache.dir, 'misses')).filter((n) => n.startsWith('.')),
    [],
  );
});

test('downloads left by a run that died are removed once old enough', async () => {
  const cache = new SymbolCache(join(work, 'c3'));
  const old = await cache.tempPath('ef'.repeat(20));
  const fresh = await cache.tempPath('ef'.repeat(20));
  writeFileSync(old, 'partial');
  writeFileSync(fresh, 'partial');
  utimesSync(old, new Date(0), new Date(0));
  assert.equal(await cache.removeStaleTemporaries(60_000), 1);
  assert.deepEqual(existsSync(old), false);
  assert.deepEqual(existsSync(fresh), true);
  mkdirSync(join(work, 'c4'));
  assert.equal(await new SymbolCache(join(work, 'c4')).removeStaleTemporaries(0), 0);
});

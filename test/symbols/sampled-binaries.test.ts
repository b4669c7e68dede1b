// Copying the sampled binaries into perf's build-id cache: only ELF files of the target whose build-id matches,
// within the size limits, never through a link out of the target, and not twice.
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseBuildIdList } from '../../src/perf/buildid-cache.js';
import { readElfFile } from '../../src/symbols/elf.js';
import { cacheSampledBinaries } from '../../src/symbols/sampled-binaries.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { FakeProc } from '../target/fake-proc.js';

const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';

async function setup(t: import('node:test').TestContext) {
  const proc = await FakeProc.create();
  await proc.add({ pid: 77, nspid: 1, comm: 'app', cmdline: ['app'], maps: '' });
  const root = join(proc.root, '77', 'root');
  await mkdir(join(root, 'lib'), { recursive: true });
  await copyFile(libc, join(root, 'lib', 'libc.so.6'));
  // A link out of the target, to the same library on the host: must never be followed there.
  await symlink(libc, join(root, 'lib', 'escape.so'));
  const cache = await mkdtemp(join(tmpdir(), 'profcpu-buildid-'));
  const files = await TargetFiles.open(77, { procRoot: proc.root });
  const buildId = (await readElfFile(libc)).buildId!;
  t.after(async () => {
    await files.close();
    await proc.dispose();
    await rm(cache, { recursive: true, force: true });
  });
  return { files, cache, buildId };
}

test('parseBuildIdList reads perf buildid-list lines', () => {
  assert.deepEqual(parseBuildIdList('4a5a [kernel.kallsyms]\nzz not one\n93ac61ec /usr/lib/libc.so.6\n'), [
    { buildId: '4a5a', path: '[kernel.kallsyms]' },
    { buildId: '93ac61ec', path: '/usr/lib/libc.so.6' },
  ]);
});

test('a sampled library is copied into its cache entry once; pseudo files are left alone', async (t) => {
  const { files, cache, buildId } = await setup(t);
  const sampled = [
    { buildId: '4a5a9b0a', path: '[kernel.kallsyms]' },
    { buildId, path: '/lib/libc.so.6' },
  ];
  const first = await cacheSampledBinaries(sampled, files, cache);
  assert.deepEqual(
    first.map((b) => [b.path, b.status]),
    [['/lib/libc.so.6', 'copied']],
  );
  const elf = join(cache, '.build-id', buildId.slice(0, 2), buildId.slice(2), 'elf');
  assert.deepEqual(await readFile(elf), await readFile(libc));
  const second = await cacheSampledBinaries(sampled, files, cache);
  assert.equal(second[0]?.status, 'present');
});

test('limits, a changed build-id and a link out of the target are refused', async (t) => {
  const { files, cache, buildId } = await setup(t);
  const [big] = await cacheSampledBinaries([{ buildId, path: '/lib/libc.so.6' }], files, cache, {
    maxFileBytes: 1000,
  });
  assert.equal(big?.status, 'skipped');
  assert.match(big?.reason ?? '', /more than the 1000-byte limit/);
  const [changed] = await cacheSampledBinaries([{ buildId: 'abcdef12', path: '/lib/libc.so.6' }], files, cache);
  assert.equal(changed?.status, 'skipped');
  assert.match(changed?.reason ?? '', /build-id is now/);
  // /lib/escape.so -> /usr/lib/x86_64-linux-gnu/libc.so.6, which the fake target does not have.
  const [escape] = await cacheSampledBinaries([{ buildId, path: '/lib/escape.so' }], files, cache);
  assert.equal(escape?.status, 'missing');
  const [climb] = await cacheSampledBinaries([{ buildId, path: '/lib/../../../../etc/passwd' }], files, cache);
  assert.notEqual(climb?.status, 'copied');
});

// Which libraries each --symbols mode looks at: pure, over made-up maps and perf buildid-list answers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isTargetFilePath, selectLibraries } from '../../src/debug-files/library-selection.js';

const coreclr = '/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/libcoreclr.so';
const clrjit = '/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/libclrjit.so';
const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const libssl = '/usr/lib/x86_64-linux-gnu/libssl.so.3';
const mapped = [
  '/app/Shop',
  libssl,
  libc,
  coreclr,
  clrjit,
  libc,
  '/app/Shop.dll',
  '/memfd:doublemapper (deleted)',
  '/usr/lib/x86_64-linux-gnu/libgone.so (deleted)',
  '//anon',
  '[vdso]',
  '',
];
const id = (n: number) => n.toString(16).padStart(2, '0').repeat(20);
const sampled = [
  { buildId: id(1), path: '[kernel.kallsyms]' },
  { buildId: id(2), path: '[vdso]' },
  { buildId: id(3), path: libc },
  { buildId: id(4), path: clrjit },
  { buildId: id(5), path: '/tmp/perf-1.map' },
  { buildId: id(6), path: '/usr/lib/x86_64-linux-gnu/libz.so.1' },
];

test('sampled: libcoreclr.so from the maps, then every sampled file, with the build-id perf recorded', () => {
  assert.deepEqual(selectLibraries('sampled', { mapped, sampled }), [
    { path: coreclr },
    { path: libc, buildId: id(3) },
    { path: '/usr/lib/x86_64-linux-gnu/libz.so.1', buildId: id(6) },
    { path: clrjit, buildId: id(4) },
  ]);
  // Not mapped, not sampled: libssl.so.3 and the app's own binary are left alone.
  assert.ok(!selectLibraries('sampled', { mapped, sampled }).some((l) => l.path === libssl || l.path === '/app/Shop'));
});

test('sampled: a sampled libcoreclr.so keeps its build-id; no maps (the target exited) leaves the sampled files', () => {
  const withCoreclr = [...sampled, { buildId: id(7), path: coreclr }];
  assert.deepEqual(selectLibraries('sampled', { mapped, sampled: withCoreclr })[0], { path: coreclr, buildId: id(7) });
  assert.deepEqual(
    selectLibraries('sampled', { mapped: [], sampled }).map((l) => l.path),
    [libc, '/usr/lib/x86_64-linux-gnu/libz.so.1', clrjit],
  );
  assert.deepEqual(selectLibraries('sampled', { mapped: [libc] }), []);
});

test('coreclr: libcoreclr.so alone; none mapped, nothing', () => {
  assert.deepEqual(selectLibraries('coreclr', { mapped, sampled }), [{ path: coreclr }]);
  assert.deepEqual(selectLibraries('coreclr', { mapped: [libc, libssl] }), []);
});

test('all: every mapped file once, libcoreclr.so first, then by path; no pseudo files', () => {
  assert.deepEqual(
    selectLibraries('all', { mapped, sampled }).map((l) => l.path),
    [coreclr, '/app/Shop', '/app/Shop.dll', libc, libssl, clrjit],
  );
});

test('isTargetFilePath: files, not what perf or /proc name without one', () => {
  for (const path of [libc, '/app/Shop', '/tmp/app/libhot.so', '/tmp/perf-tools/lib.so'])
    assert.equal(isTargetFilePath(path), true, path);
  for (const path of [
    '[kernel.kallsyms]',
    '[vdso]',
    '//anon',
    '',
    '/memfd:doublemapper (deleted)',
    '/usr/lib/libgone.so (deleted)',
    '/tmp/perf-12.map',
    '/tmp/jit-12.dump',
  ])
    assert.equal(isTargetFilePath(path), false, path);
});

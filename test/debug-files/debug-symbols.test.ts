// fetchTargetSymbols over an injected /proc (a folder holding `<pid>/maps` and `<pid>/root`), and fetchFileSymbols,
// against a static SSQP store on loopback.
import assert from 'node:assert/strict';
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { fetchFileSymbols, fetchTargetSymbols, isDotnetLibrary } from '../../src/debug-files/debug-symbols.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { microsoftSymbolServer, ssqpDebugKey, type SymbolServer } from '../../src/debug-files/symbol-server.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { startStaticServer, type StaticServer } from '../support/static-server.js';

let work: string;
let lib: NativeLib | undefined;
let store: StaticServer;
let servers: SymbolServer[];

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-debug-symbols-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
  if (lib) {
    const key = join(work, 'store', ssqpDebugKey(lib.buildId));
    mkdirSync(dirname(key), { recursive: true });
    copyFileSync(lib.debug, key);
  }
  store = await startStaticServer(join(work, 'store'));
  servers = [{ kind: 'ssqp', url: store.url, origin: 'test' }];
});
after(async () => {
  await store.close();
  rmSync(work, { recursive: true, force: true });
});

/** A /proc with one process whose root is a folder holding the library at /opt/app/ and a PE-like .dll. */
function fakeProc(l: NativeLib): string {
  const proc = join(work, `proc-${Math.random().toString(36).slice(2)}`);
  const root = join(proc, '42', 'root');
  mkdirSync(join(root, 'opt/app'), { recursive: true });
  copyFileSync(l.stripped, join(root, 'opt/app/libhotlib.so'));
  copyFileSync(l.program, join(root, 'opt/app/hotprog'));
  writeFileSync(join(root, 'opt/app/App.dll'), 'MZ not an ELF file');
  mkdirSync(join(root, 'usr/share/dotnet'), { recursive: true });
  copyFileSync(l.stripped, join(root, 'usr/share/dotnet/libcoreclr.so'));
  const maps = [
    '55d0a0000000-55d0a0001000 r--p 00000000 08:01 11 /opt/app/hotprog',
    '55d0a0001000-55d0a0002000 r-xp 00001000 08:01 11 /opt/app/hotprog',
    '7f0000000000-7f0000001000 r--p 00000000 08:01 12 /opt/app/libhotlib.so',
    '7f0000001000-7f0000002000 r-xp 00001000 08:01 12 /opt/app/libhotlib.so',
    '7f0000010000-7f0000020000 r-xp 00000000 08:01 13 /opt/app/App.dll',
    '7f0000020000-7f0000030000 r-xp 00000000 08:01 14 /usr/share/dotnet/libcoreclr.so',
    '7f0000030000-7f0000040000 r-xp 00000000 00:01 15 /memfd:doublemapper (deleted)',
    '7f0000040000-7f0000050000 rw-p 00000000 00:00 0 ',
    '7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0 [vdso]',
    '',
  ].join('\n');
  writeFileSync(join(proc, '42', 'maps'), maps);
  return proc;
}

test('every mapped native library lacking symbols gets its debug file placed; others say why not', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const procRoot = fakeProc(l);
  const cacheDir = join(work, 'cache-all');
  const buildIdDir = join(work, 'perf-all');
  const report = await fetchTargetSymbols({ pid: 42, procRoot, libraries: 'all', servers, cacheDir, buildIdDir });
  assert.deepEqual(report.servers, [`ssqp:${store.url}`]);
  assert.deepEqual(
    report.libraries.map((x) => [x.path, x.status, x.source]),
    [
      // libcoreclr.so first (it goes first under a limit), then by path.
      ['/usr/share/dotnet/libcoreclr.so', 'placed', store.url],
      ['/opt/app/hotprog', 'has-symbols', undefined],
      // The same build-id under another name: one download, placed once (the entry is keyed by build-id).
      ['/opt/app/libhotlib.so', 'placed', store.url],
    ],
  );
  const placed = report.libraries[0]!;
  assert.equal(placed.placedAt, join(buildIdDir, 'usr/share/dotnet/libcoreclr.so', l.buildId, 'debug'));
  assert.deepEqual(readFileSync(placed.placedAt), readFileSync(l.debug));
  assert.equal(report.libraries[2]!.placedAt, placed.placedAt);
  assert.equal(store.requests.length, 1);
});

test('coreclr only, from the cache when offline, and a target that cannot be seen', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const procRoot = fakeProc(l);
  const cacheDir = join(work, 'cache-coreclr');
  const buildIdDir = join(work, 'perf-coreclr');
  const offline = await fetchTargetSymbols({
    pid: 42,
    procRoot,
    libraries: 'coreclr',
    servers: [],
    cacheDir,
    buildIdDir,
  });
  assert.deepEqual(
    offline.libraries.map((x) => [x.path, x.status]),
    [['/usr/share/dotnet/libcoreclr.so', 'offline']],
  );
  await fetchTargetSymbols({ pid: 42, procRoot, libraries: 'coreclr', servers, cacheDir, buildIdDir });
  // Placed already in perf's cache: nothing asked, not even profcpu's cache.
  const requests = store.requests.length;
  const present = await fetchTargetSymbols({ pid: 42, procRoot, libraries: 'coreclr', servers, cacheDir, buildIdDir });
  assert.deepEqual(
    present.libraries.map((x) => [x.status, x.placedAt]),
    [['present', join(buildIdDir, 'usr/share/dotnet/libcoreclr.so', l.buildId, 'debug')]],
  );
  assert.equal(store.requests.length, requests);
  const cached = await fetchTargetSymbols({
    pid: 42,
    procRoot,
    libraries: 'coreclr',
    servers: [],
    cacheDir,
    buildIdDir: join(work, 'perf-coreclr-2'),
  });
  assert.deepEqual(
    cached.libraries.map((x) => [x.status, x.source]),
    [['placed', 'cache']],
  );
  await assert.rejects(
    fetchTargetSymbols({ pid: 43, procRoot, libraries: 'all', servers, cacheDir, buildIdDir }),
    (e: unknown) => isProfcpuError(e, 'TARGET_NOT_VISIBLE'),
  );
});

/** A copy of the stripped library under another build-id (one byte of its note changed): no server has it. */
function otherLibrary(l: NativeLib, to: string): string {
  const bytes = Buffer.from(readFileSync(l.stripped));
  const id = Buffer.from(l.buildId, 'hex');
  const at = bytes.indexOf(id);
  assert.ok(at > 0, 'the build-id note is in the file');
  id[0] = id[0]! ^ 0xff;
  id.copy(bytes, at);
  writeFileSync(to, bytes);
  return id.toString('hex');
}

test('sampled: libcoreclr.so and the sampled files lacking symbols, up to maxLibraries; no maps needed', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const procRoot = fakeProc(l);
  const root = join(procRoot, '42', 'root');
  const otherId = otherLibrary(l, join(root, 'opt/app/libother.so'));
  const programId = (await readElfFile(l.program)).buildId!;
  const sampled = [
    { buildId: 'ab'.repeat(20), path: '[kernel.kallsyms]' },
    { buildId: programId, path: '/opt/app/hotprog' },
    { buildId: otherId, path: '/opt/app/libother.so' },
    { buildId: l.buildId, path: '/opt/app/libhotlib.so' },
    // Replaced since perf recorded it: its symbols would not be the samples'.
    { buildId: 'cd'.repeat(20), path: '/opt/app/hotprog-old' },
  ];
  copyFileSync(l.program, join(root, 'opt/app/hotprog-old'));
  const dirs = { cacheDir: join(work, 'cache-sampled'), buildIdDir: join(work, 'perf-sampled') };
  const report = await fetchTargetSymbols({ pid: 42, procRoot, libraries: 'sampled', sampled, servers, ...dirs });
  assert.deepEqual(
    report.libraries.map((x) => [x.path, x.status]),
    [
      // From the maps, though not sampled; first.
      ['/usr/share/dotnet/libcoreclr.so', 'placed'],
      ['/opt/app/hotprog', 'has-symbols'],
      ['/opt/app/hotprog-old', 'unreadable'],
      ['/opt/app/libhotlib.so', 'placed'],
      ['/opt/app/libother.so', 'not-found'],
    ],
  );
  assert.match(report.libraries[2]!.reason!, new RegExp(`build-id is now ${programId}, not ${'cd'.repeat(20)}`));

  // One library's debug file looked for at most: libcoreclr.so's build-id (shared by libhotlib.so) is the one.
  const capped = await fetchTargetSymbols({
    pid: 42,
    procRoot,
    libraries: 'sampled',
    sampled,
    servers,
    maxLibraries: 1,
    cacheDir: dirs.cacheDir,
    buildIdDir: join(work, 'perf-sampled-capped'),
  });
  assert.deepEqual(
    capped.libraries.filter((x) => x.path.includes('lib')).map((x) => [x.path, x.status]),
    [
      ['/usr/share/dotnet/libcoreclr.so', 'placed'],
      ['/opt/app/libhotlib.so', 'placed'],
      ['/opt/app/libother.so', 'over-limit'],
    ],
  );
  assert.match(capped.libraries.at(-1)!.reason!, /2 libraries need debug files; only the first 1 were looked for/);

  // The target exited: no maps, its file system still open (collect's session holds it); what perf sampled is done.
  unlinkSync(join(procRoot, '42', 'maps'));
  const files = await TargetFiles.open(42, { procRoot });
  t.after(() => files.close());
  const gone = await fetchTargetSymbols({ pid: 42, procRoot, libraries: 'sampled', sampled, servers, files, ...dirs });
  assert.deepEqual(
    gone.libraries.map((x) => [x.path, x.status]),
    [
      ['/opt/app/hotprog', 'has-symbols'],
      ['/opt/app/hotprog-old', 'unreadable'],
      ['/opt/app/libhotlib.so', 'present'],
      ['/opt/app/libother.so', 'not-found'],
    ],
  );
  await assert.rejects(fetchTargetSymbols({ pid: 42, procRoot, libraries: 'all', servers, ...dirs }), (e: unknown) =>
    isProfcpuError(e, 'TARGET_NOT_VISIBLE'),
  );
});

test('files named directly; unreadable and build-id-less files are reported, not thrown', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const noId = join(work, 'noid.so');
  const bytes = Buffer.from(readFileSync(l.stripped));
  bytes.writeBigUInt64LE(0n, 40); // no section headers...
  bytes.writeUInt16LE(0, 56); // ...and no program headers: nowhere to find a build-id
  writeFileSync(noId, bytes);
  const link = join(work, 'link.so');
  symlinkSync(l.stripped, link);
  const report = await fetchFileSymbols([link, noId, join(work, 'missing.so')], {
    servers,
    cacheDir: join(work, 'cache-files'),
    buildIdDir: join(work, 'perf-files'),
  });
  assert.deepEqual(
    report.libraries.map((x) => [x.path, x.status]),
    [
      [link, 'placed'],
      [noId, 'no-build-id'],
      [join(work, 'missing.so'), 'unreadable'],
    ],
  );
  assert.match(report.libraries[2]!.reason ?? '', /cannot open/);
});

test('a system library is not asked of Microsoft’s server (it has .NET’s files only): no request, no warning, the fix said', async () => {
  assert.ok(isDotnetLibrary('/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/libcoreclr.so'));
  assert.ok(isDotnetLibrary('/app/libclrjit.so') && isDotnetLibrary('/app/libSystem.Native.so'));
  assert.ok(!isDotnetLibrary('/usr/lib/x86_64-linux-gnu/libc.so.6'));
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-ms-only-'));
  try {
    const warnings: string[] = [];
    const report = await fetchFileSymbols(['/usr/lib/x86_64-linux-gnu/libc.so.6'], {
      servers: [{ kind: 'ssqp', url: microsoftSymbolServer, origin: 'default' }],
      cacheDir: join(dir, 'cache'),
      buildIdDir: join(dir, 'buildid'),
      warn: (w) => warnings.push(w),
    });
    const [libc] = report.libraries;
    assert.equal(libc?.status, 'not-found');
    assert.match(libc?.reason ?? '', /no debuginfod server is set \(DEBUGINFOD_URLS/);
    assert.deepEqual(warnings, []);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

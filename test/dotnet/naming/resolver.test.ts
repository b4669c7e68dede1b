import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addressForm, createDotnetResolver, unloggedStubName } from '../../../src/dotnet/naming/resolver.js';
import { parseProcMaps } from '../../../src/target/proc-maps.js';

// Shapes taken from a .NET 10 process with W^X on (perf 6.1, see resolver.ts): the memfd holds JIT code twice, an
// executable view and a writable one with the same file offsets; CoreLib's ReadyToRun code is its r-xp mapping.
const coreLib = '/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/System.Private.CoreLib.dll';
const maps = parseProcMaps(
  [
    '7fc078e70000-7fc078e7c000 r-xs 00111000 00:01 36    /memfd:doublemapper (deleted)',
    '7fc0f7c07000-7fc0f7c09000 rw-s 0011a000 00:01 36    /memfd:doublemapper (deleted)',
    `7fe1b5000000-7fe1b5edb000 r--s 00000000 fe:00 350922 ${coreLib}`,
    `7fe1b8870000-7fe1b93bc000 r-xp 00000000 fe:00 350922 ${coreLib}`,
    '7f456e480000-7f456e490000 rwxp 00000000 00:00 0 ',
    '7fc0f7af8000-7fc0f7afd000 rw-p 00000000 00:00 0 ',
  ].join('\n'),
).mappings;

const sortName = 'int32 [NamingExp] NamingExp.Work::Sort(int32)[OptimizedTier1]';
const r2rName =
  'instance void [System.Private.CoreLib] Microsoft.Win32.SafeHandles.SafeFileHandle::.ctor(native int,bool)[PreJIT]';
const anonName = 'void [NamingExp] NamingExp.Program::Main(string[])[QuickJitted]';
const symbols = [
  { start: 0x7fc078e7a800n, size: 0x1a0n, name: sortName },
  { start: 0x7fe1b89864a0n, size: 0x39n, name: r2rName },
  { start: 0x7f456e4872c0n, size: 0x100n, name: anonName },
];

const resolver = () => createDotnetResolver({ symbols, mappings: maps, pids: [8439, 1] });

test('memfd:doublemapper frames: the printed offset goes back through the executable view', () => {
  const r = resolver();
  // 0x7fc078e7a8cf - 0x7fc078e70000 + 0x111000 = 0x11b8cf, which also falls in the writable view.
  assert.deepEqual(r.resolve({ pid: 8439, ip: 0x11b8cfn, dso: '/memfd:doublemapper (deleted)' }), {
    name: sortName,
    kind: 'jit',
  });
  // Executable runtime memory no map names: a stub the runtime never logged, labelled but not named.
  assert.deepEqual(r.resolve({ pid: 8439, ip: 0x111040n, dso: '/memfd:doublemapper (deleted)' }), {
    name: unloggedStubName,
    kind: 'unknown',
  });
  assert.equal(r.resolve({ pid: 8439, ip: 0x500000n, dso: '/memfd:doublemapper (deleted)' }), undefined);
  assert.deepEqual(
    { jit: r.stats.jit, unloggedStubs: r.stats.unloggedStubs, noSymbol: r.stats.noSymbol, noMapping: 1 },
    { jit: 1, unloggedStubs: 1, noSymbol: 0, noMapping: 1 },
  );
  assert.deepEqual(r.stats.unnamedByFile, { 'memfd:doublemapper (deleted)': 1 });
});

test('perf 6.12 prints absolute addresses in memfd and .dll mappings: recognised as such', () => {
  const r = resolver();
  assert.deepEqual(r.resolve({ pid: 1, ip: 0x7fc078e7a8cfn, dso: '/memfd:doublemapper (deleted)' }), {
    name: sortName,
    kind: 'jit',
  });
  assert.deepEqual(r.resolve({ pid: 1, ip: 0x7fe1b89864b0n, dso: coreLib }), { name: r2rName, kind: 'readytorun' });
  assert.deepEqual([r.stats.jit, r.stats.readytorun], [1, 1]);
});

test('without any perf map or jitdump, runtime memory is not taken for stubs', () => {
  const r = createDotnetResolver({ symbols: [], mappings: maps });
  assert.equal(r.resolve({ pid: 1, ip: 0x11b8cfn, dso: '/memfd:doublemapper (deleted)' }), undefined);
  assert.equal(r.resolve({ pid: 1, ip: 0x7f456e4872fcn, dso: '//anon' }), undefined);
  assert.deepEqual([r.stats.unloggedStubs, r.stats.noSymbol], [0, 2]);
});

test('ReadyToRun frames: the offset in the .dll goes back through its mapping, named from the jitdump', () => {
  const r = resolver();
  assert.deepEqual(r.resolve({ pid: 1, ip: 0x1164a0n + 0x10n, dso: coreLib }), { name: r2rName, kind: 'readytorun' });
  // The same file seen under another directory (another mount namespace) is matched by its name.
  assert.equal(
    r.resolve({ pid: 1, ip: 0x1164a0n, dso: '/app/runtime/System.Private.CoreLib.dll' })?.kind,
    'readytorun',
  );
  assert.equal(r.stats.readytorun, 2);
});

test('anonymous JIT code (W^X off) and frames in no mapping are absolute addresses', () => {
  const r = resolver();
  assert.deepEqual(r.resolve({ pid: 8439, ip: 0x7f456e4872fcn, dso: '/tmp/perf-8439.map' }), {
    name: anonName,
    kind: 'jit',
  });
  assert.equal(r.resolve({ pid: 8439, ip: 0x7f456e4872fcn, dso: '//anon' })?.name, anonName);
  assert.equal(r.resolve({ pid: undefined, ip: 0x7fc078e7a8cfn, dso: '[unknown]' })?.name, sortName);
  // Unlogged code in the anonymous code heap is a stub; a broken frame-pointer chain lands in data or nowhere.
  assert.equal(r.resolve({ pid: 8439, ip: 0x7f456e480010n, dso: '[unknown]' })?.name, unloggedStubName);
  assert.equal(r.resolve({ pid: 8439, ip: 0x7fc0f7af90e0n, dso: '[unknown]' }), undefined);
  assert.equal(r.resolve({ pid: 8439, ip: 0n, dso: '[unknown]' }), undefined);
  assert.deepEqual([r.stats.unloggedStubs, r.stats.noMapping, r.stats.noSymbol], [1, 2, 0]);
});

test('a .dll offset that no jitdump entry covers is a missing symbol, not a stub', () => {
  const r = resolver();
  assert.equal(r.resolve({ pid: 1, ip: 0x10n, dso: coreLib }), undefined);
  assert.deepEqual([r.stats.noSymbol, r.stats.unloggedStubs], [1, 0]);
});

test('leaves the kernel, native files and other processes alone', () => {
  const r = resolver();
  assert.equal(r.resolve({ pid: 8439, ip: 0xffffffff81000000n, dso: '[kernel.kallsyms]' }), undefined);
  assert.equal(r.resolve({ pid: 8439, ip: 0x458a31n, dso: '/usr/share/dotnet/libcoreclr.so' }), undefined);
  assert.equal(r.resolve({ pid: 77, ip: 0x11b8cfn, dso: '/memfd:doublemapper (deleted)' }), undefined);
  assert.equal(r.stats.notManaged, 3);
  assert.deepEqual(r.stats.unnamedByFile, {
    '[kernel.kallsyms]': 1,
    'libcoreclr.so': 1,
    'memfd:doublemapper (deleted)': 1,
  });
  // Without pids, every process is the target.
  const any = createDotnetResolver({ symbols, mappings: maps });
  assert.equal(any.resolve({ pid: 77, ip: 0x11b8cfn, dso: '/memfd:doublemapper (deleted)' })?.name, sortName);
});

test('addressForm says how perf printed an address', () => {
  assert.equal(addressForm('[unknown]'), 'absolute');
  assert.equal(addressForm('/tmp/perf-1.map'), 'absolute');
  assert.equal(addressForm('//anon'), 'absolute');
  assert.equal(addressForm('/memfd:doublemapper (deleted)'), 'relative');
  assert.equal(addressForm('/memfd:doublemapper'), 'relative');
  assert.equal(addressForm('/app/MyApp.DLL'), 'relative');
  assert.equal(addressForm('/usr/lib/x86_64-linux-gnu/libc.so.6'), 'other');
  assert.equal(addressForm('[vdso]'), 'other');
});

test('a frame asked about twice (the fold, then the FlameScope file) is counted once', () => {
  const r = resolver();
  for (let i = 0; i < 2; i++) {
    r.resolve({ pid: 8439, ip: 0x7fe1b89864b0n, dso: '[unknown]' });
    r.resolve({ pid: 8439, ip: 0x10n, dso: '/lib/__proto__' });
    r.resolve({ pid: 8439, ip: 0x10n, dso: '/lib/constructor' });
  }
  assert.equal(r.stats.readytorun, 1);
  assert.equal(r.stats.notManaged, 2);
  assert.equal(JSON.stringify(r.stats.unnamedByFile), '{"__proto__":1,"constructor":1}');
});

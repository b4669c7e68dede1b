import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import {
  FileCodeMappings,
  isAnonymous,
  isExecutable,
  parseProcMaps,
  placesInFile,
  ProcMapsIndex,
} from '../../src/target/proc-maps.js';

// Lines as a .NET 10 process with W^X on prints them (trimmed), plus the kernel's pseudo-mappings.
const sample = [
  '5581c0a00000-5581c0a0c000 r--p 00000000 08:01 1054321                    /usr/share/dotnet/dotnet',
  '7f3a50000000-7f3a50010000 r-xp 00000000 00:01 2049                       /memfd:doublemapper (deleted)',
  '7f3a60000000-7f3a60001000 rw-p 00000000 00:00 0 ',
  '7f3a6c3a1000-7f3a6c5f2000 r-xp 00010000 fe:01 3932170                    /usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/System.Private.CoreLib.dll',
  '7ffd7a1f0000-7ffd7a211000 rw-p 00000000 00:00 0                          [stack]',
  '7ffd7a3d8000-7ffd7a3da000 r-xp 00000000 00:00 0                          [vdso]',
  'ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]',
].join('\n');

test('parses every field, keeps paths with spaces, marks anonymous mappings', () => {
  const { mappings, skipped } = parseProcMaps(sample + '\n');
  assert.equal(skipped, 0);
  assert.equal(mappings.length, 7);
  const [exe, memfd, anon, dll] = mappings;
  assert.deepEqual(exe, {
    start: 0x5581c0a00000n,
    end: 0x5581c0a0c000n,
    perms: 'r--p',
    offset: 0n,
    dev: '08:01',
    inode: 1054321,
    path: '/usr/share/dotnet/dotnet',
  });
  assert.equal(memfd!.path, '/memfd:doublemapper (deleted)');
  assert.ok(isExecutable(memfd!));
  assert.equal(anon!.path, '');
  assert.ok(isAnonymous(anon!));
  assert.ok(!isAnonymous(memfd!));
  assert.equal(dll!.offset, 0x10000n);
  assert.equal(mappings[6]!.end, 0xffffffffff601000n);
});

test('counts lines that are not mappings, including a truncated last line', () => {
  const { mappings, skipped } = parseProcMaps(sample + '\nnot a mapping\n7f3a6c3a1000-7f3a6c5f2');
  assert.equal(mappings.length, 7);
  assert.equal(skipped, 2);
});

test('index finds the mapping holding an address, and none in the gaps', () => {
  const index = new ProcMapsIndex(parseProcMaps(sample).mappings.reverse());
  assert.equal(index.find(0x7f3a50000000n)?.path, '/memfd:doublemapper (deleted)');
  assert.equal(index.find(0x7f3a5000ffffn)?.path, '/memfd:doublemapper (deleted)');
  assert.equal(index.find(0x7f3a50010000n), undefined);
  assert.equal(index.find(0x1000n), undefined);
  assert.equal(index.find(0xffffffffff600010n)?.path, '[vsyscall]');
  assert.equal(index.byPath('/usr/share/dotnet/dotnet').length, 1);
});

test('parses this process own maps', () => {
  const { mappings, skipped } = parseProcMaps(readFileSync('/proc/self/maps', 'utf8'));
  assert.equal(skipped, 0);
  assert.ok(mappings.some((m) => m.path.endsWith('/node') || m.path.includes('node')));
  const index = new ProcMapsIndex(mappings);
  for (const m of mappings) assert.equal(index.find(m.start), m);
});

test('a file’s code mappings place what perf printed in it: an absolute address, else an offset into the file', () => {
  const { mappings } = parseProcMaps(
    [
      '7f0000000000-7f0000001000 r--p 00000000 08:01 11 /app/libx.so',
      '7f0000001000-7f0000003000 r-xp 00001000 08:01 11 /app/libx.so',
      '7f0000001000-7f0000003000 r-xp 00001000 08:01 11 /app/libx.so',
      '7f1000000000-7f1000002000 r-xp 00001000 08:01 11 /app/libx.so',
      '7f2000000000-7f2000001000 r-xp 00000000 08:01 12 /app/liby.so (deleted)',
      '7f3000000000-7f3000001000 r-xp 00000000 00:00 0 ',
    ].join('\n'),
  );
  const files = new FileCodeMappings(mappings);
  // Executable ones only, each once; a mapping without a path is left out.
  assert.equal(files.ofPath('/app/libx.so').length, 2);
  assert.deepEqual(files.ofPath(''), []);
  // Seen from another mount namespace: by file name.
  assert.equal(files.of('/other/root/app/libx.so').length, 2);
  const x = files.of('/app/libx.so');
  // An address inside a mapping is absolute: one place.
  assert.deepEqual(
    placesInFile(0x7f0000001234n, x).map((p) => p.address),
    [0x7f0000001234n],
  );
  // An offset into the file: each mapping of that part of the file, in order.
  assert.deepEqual(
    placesInFile(0x1234n, x).map((p) => p.address),
    [0x7f0000001234n, 0x7f1000000234n],
  );
  assert.deepEqual(placesInFile(0x9000n, x), []);
  // Known by another path: what the caller says (here without ` (deleted)`).
  const undeleted = new FileCodeMappings(mappings, ({ path }) => path.replace(/ \(deleted\)$/, '') || undefined);
  assert.equal(undeleted.ofPath('/app/liby.so')[0]?.path, '/app/liby.so');
  assert.deepEqual(files.ofPath('/app/liby.so'), []);
});

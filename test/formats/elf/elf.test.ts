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
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { crc32 } from 'node:zlib';
import { isProfcpuError } from '../../../src/error.js';
import {
  bytesSource,
  elfReadLimits,
  isBuildId,
  readElf,
  readElfFile,
  readSectionContents,
  type ByteSource,
} from '../../../src/formats/elf/elf.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../../fixtures/native-lib/build.js';
import { need, needCommand } from '../../support/requirements.js';

let work: string;
let lib: NativeLib | undefined;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-elf-'));
  lib = buildNativeLibIfPossible(work);
});
after(() => rmSync(work, { recursive: true, force: true }));

const malformed = (error: unknown) => isProfcpuError(error, 'ELF_MALFORMED');

test('a stripped library: build-id, debuglink with the debug file’s CRC, no symbols', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const info = await readElfFile(l.stripped);
  assert.equal(info.buildId, l.buildId);
  assert.equal(info.bits, 64);
  assert.equal(info.littleEndian, true);
  assert.deepEqual(info.debugLink, { file: 'libhotlib.so.debug', crc32: crc32(readFileSync(l.debug)) });
  assert.equal(info.hasSymtab, false);
  assert.equal(info.hasDebugInfo, false);
  assert.equal(info.hasCode, true);
});

test('a section at a kernel address (past 2^53) reads as before; only its contents by address are refused', async (t) => {
  if (!needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'objcopy', 'binutils')) return;
  const object = join(work, 'high.o');
  const high = join(work, 'high-text.o');
  writeFileSync(join(work, 'high.c'), 'int f(void) { return 1; }\n');
  execFileSync('gcc', ['-c', '-o', object, join(work, 'high.c')]);
  execFileSync('objcopy', ['--change-section-address', '.text=0xffffffff81000000', object, high]);
  assert.equal((await readElfFile(high)).hasSymtab, true);
  const source = bytesSource(readFileSync(high));
  await assert.rejects(readSectionContents(source, ['.text'], high, 1 << 20), malformed);
  assert.equal((await readSectionContents(bytesSource(readFileSync(object)), ['.text'], object, 1 << 20)).size, 1);
});

test('the library as linked has .symtab and DWARF; --only-keep-debug keeps them without code', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const full = await readElfFile(l.full);
  assert.deepEqual([full.buildId, full.hasSymtab, full.hasDebugInfo, full.hasCode], [l.buildId, true, true, true]);
  assert.equal(full.debugLink, undefined);
  const debug = await readElfFile(l.debug);
  assert.deepEqual([debug.buildId, debug.hasSymtab, debug.hasDebugInfo, debug.hasCode], [l.buildId, true, true, false]);
});

test('an executable with 8-byte aligned notes (.note.gnu.property) before its build-id', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const expected = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', l.program], { encoding: 'utf8' }))?.[1];
  const info = await readElfFile(l.program);
  assert.equal(info.buildId, expected);
  assert.deepEqual([info.hasSymtab, info.hasDebugInfo, info.hasCode], [true, true, true]);
});

test('strip --strip-debug keeps .symtab and drops DWARF', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const out = join(work, 'libhotlib.so.nodebug');
  execFileSync('strip', ['--strip-debug', '-o', out, l.full]);
  const info = await readElfFile(out);
  assert.deepEqual([info.buildId, info.hasSymtab, info.hasDebugInfo], [l.buildId, true, false]);
});

test('without section headers the build-id still comes from the PT_NOTE segment', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const bytes = Buffer.from(readFileSync(l.stripped));
  bytes.writeBigUInt64LE(0n, 40); // e_shoff
  bytes.writeUInt16LE(0, 60); // e_shnum
  const info = await readElf(bytesSource(bytes), 'no-sections');
  assert.equal(info.buildId, l.buildId);
  assert.equal(info.debugLink, undefined);
});

test('the .NET SDK’s libcoreclr.so: stripped, build-id as readelf prints it, debuglink to libcoreclr.so.dbg', async (t) => {
  const root = '/usr/share/dotnet/shared/Microsoft.NETCore.App';
  const versions = existsSync(root) ? readdirSync(root).sort() : [];
  const path = versions.map((v) => join(root, v, 'libcoreclr.so')).find((p) => existsSync(p));
  if (!need(t, path !== undefined, `the .NET SDK's libcoreclr.so (under ${root})`)) return;
  if (!needCommand(t, 'readelf', 'binutils')) return;
  const expected = /Build ID: ([0-9a-f]+)/.exec(execFileSync('readelf', ['-n', path!], { encoding: 'utf8' }))?.[1];
  const info = await readElfFile(path!);
  assert.equal(info.buildId, expected);
  assert.equal(info.debugLink?.file, 'libcoreclr.so.dbg');
  assert.equal(info.hasSymtab, false);
  assert.equal(info.hasDebugInfo, false);
});

test('every truncation of a real library is an ELF_MALFORMED error, never a crash', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const bytes = readFileSync(l.stripped);
  // Section headers sit at the end of the file, so every cut below loses some of them.
  const cuts = [0, 1, 4, 16, 51, 63, 64, 120, 1000, bytes.length >> 1, bytes.length - 64, bytes.length - 1];
  for (const cut of cuts) {
    await assert.rejects(readElf(bytesSource(bytes.subarray(0, cut)), `cut-${cut}`), malformed, `cut at ${cut}`);
  }
  const onDisk = join(work, 'cut.so');
  writeFileSync(onDisk, bytes.subarray(0, 2000));
  await assert.rejects(readElfFile(onDisk), (e: unknown) => malformed(e) && /cut\.so/.test((e as Error).message));
});

test('hostile headers cost bounded reads', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const original = readFileSync(l.stripped);
  const counting = (bytes: Uint8Array): ByteSource & { total: number } => {
    const source = {
      size: bytes.length,
      total: 0,
      read: async (offset: number, length: number) => {
        source.total += length;
        return bytes.subarray(offset, offset + length);
      },
    };
    return source;
  };
  const cases: [string, (b: Buffer) => void][] = [
    ['section header offset past the end', (b) => b.writeBigUInt64LE(1n << 40n, 40)],
    ['section header offset beyond 2^53', (b) => b.writeBigUInt64LE(1n << 60n, 40)],
    ['65535 sections', (b) => b.writeUInt16LE(0xfffe, 60)],
    ['tiny section header entries', (b) => b.writeUInt16LE(8, 58)],
    ['name table index out of range', (b) => b.writeUInt16LE(0xfff0, 62)],
  ];
  for (const [what, corrupt] of cases) {
    const bytes = Buffer.from(original);
    corrupt(bytes);
    const source = counting(bytes);
    await readElf(source, what).then(
      (info) => assert.equal(info.buildId, l.buildId, what),
      (error: unknown) => assert.ok(malformed(error), `${what}: ${String(error)}`),
    );
    assert.ok(source.total < 4 * 65_536 + elfReadLimits.maxSectionNamesBytes, `${what}: read ${source.total} bytes`);
  }
});

test('files that are not ELF, and a missing file', async () => {
  await assert.rejects(readElf(bytesSource(Buffer.from('#!/bin/sh\necho hi\n')), 'script'), /no ELF magic/);
  const garbage = Buffer.alloc(4096, 0xa5);
  garbage.write('\x7fELF', 0, 'latin1');
  await assert.rejects(readElf(bytesSource(garbage), 'garbage'), malformed);
  await assert.rejects(readElfFile(join(tmpdir(), 'profcpu-no-such-file')), (e: unknown) => isProfcpuError(e, 'IO'));
});

test(
  'a FIFO, a directory, a device and a socket are refused before any read; a symlink to a file is followed',
  { timeout: 10_000 },
  async (t) => {
    if (!needCommand(t, 'mkfifo', 'coreutils')) return;
    const fifo = join(work, 'a-fifo');
    execFileSync('mkfifo', [fifo]);
    const dir = join(work, 'a-dir');
    mkdirSync(dir);
    const socket = join(work, 'a-socket');
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(socket, resolve));
    t.after(() => server.close());
    const cases: [string, string][] = [
      [fifo, 'a FIFO'],
      [dir, 'a directory'],
      ['/dev/zero', 'a character device'],
      [socket, 'a socket'],
    ];
    for (const [path, kind] of cases) {
      await assert.rejects(
        readElfFile(path),
        (e: unknown) =>
          isProfcpuError(e, 'BAD_INPUT') &&
          e.message === `${path}: ${kind}, not an ELF file` &&
          /regular file/.test(e.remedy ?? ''),
        path,
      );
    }
    const toFifo = join(work, 'link-to-fifo');
    symlinkSync(fifo, toFifo);
    await assert.rejects(readElfFile(toFifo), (e: unknown) => isProfcpuError(e, 'BAD_INPUT'));
    const l = needNativeLib(t, lib);
    if (!l) return;
    const toLib = join(work, 'link-to-lib.so');
    symlinkSync(l.stripped, toLib);
    assert.equal((await readElfFile(toLib)).buildId, l.buildId);
  },
);

test('a debug file copied elsewhere keeps its build-id', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const copy = join(work, 'renamed.dbg');
  copyFileSync(l.debug, copy);
  assert.equal((await readElfFile(copy)).buildId, l.buildId);
});

test('isBuildId accepts lower-case hex byte strings only', () => {
  assert.ok(isBuildId('79945f51fb2612f13b7667a10a8fd29122664791'));
  assert.ok(isBuildId('abcd'));
  for (const bad of ['', 'abc', 'ABCD', '../x', 'zz', 'a'.repeat(130)]) assert.equal(isBuildId(bad), false, bad);
});

test('a section-name table without NULs costs 64 bytes a name, not a megabyte (65 536 sections)', async () => {
  // A 64-bit little-endian header, 65 536 empty section headers, and a 1 MiB name table of 'A's at section 1.
  const count = 65_536;
  const headers = Buffer.alloc(64 * count);
  const table = Buffer.alloc(1 << 20, 0x41);
  const shoff = 64;
  const tableOffset = shoff + headers.length;
  headers.writeUInt32LE(3, 64 + 4); // section 1: SHT_STRTAB
  headers.writeBigUInt64LE(BigInt(tableOffset), 64 + 24);
  headers.writeBigUInt64LE(BigInt(table.length), 64 + 32);
  const elf = Buffer.alloc(64);
  elf.write('\x7fELF', 0, 'latin1');
  elf[4] = 2; // 64-bit
  elf[5] = 1; // little-endian
  elf[6] = 1;
  elf.writeUInt16LE(3, 16); // ET_DYN
  elf.writeUInt16LE(62, 18);
  elf.writeBigUInt64LE(BigInt(shoff), 40);
  elf.writeUInt16LE(64, 52);
  elf.writeUInt16LE(64, 58);
  elf.writeUInt16LE(0, 60); // e_shnum 0: the count is in section 0's size
  elf.writeUInt16LE(1, 62);
  headers.writeBigUInt64LE(BigInt(count), 32); // section 0's sh_size holds the section count
  const before = process.memoryUsage().rss;
  const info = await readElf(bytesSource(Buffer.concat([elf, headers, table])), 'no-nul names').catch(
    (e: unknown) => e,
  );
  const grown = process.memoryUsage().rss - before;
  assert.ok(grown < 512 << 20, `the read took ${grown} more bytes of memory`);
  assert.ok(info !== undefined);
});

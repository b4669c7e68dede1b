// The function tables the built-in engine names frames with, in their two forms: columns of doubles (every real file)
// and bigint objects (a forged file whose addresses reach 2^52 or more). The same symbols moved past 2^52 must name
// every address as the columns do; kallsyms and perf maps likewise, with addresses spanning more than 2^52.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { perfMapFunctions } from '../../../src/jit/jit-maps.js';
import { kallsymsTable } from '../../../src/formats/kallsyms.js';
import { bytesSource } from '../../../src/formats/elf/elf.js';
import { readFunctionTable } from '../../../src/formats/elf/elf-functions.js';
import { buildNativeLib } from '../../fixtures/native-lib/build.js';
import { needCommand } from '../../support/requirements.js';

/** `elf` with every load segment and every symbol moved by `shift` in virtual addresses (file offsets unchanged). */
function shifted(elf: Buffer, shift: bigint): Buffer {
  const out = Buffer.from(elf);
  const phoff = Number(out.readBigUInt64LE(0x20));
  for (let i = 0; i < out.readUInt16LE(0x38); i++) {
    const at = phoff + i * out.readUInt16LE(0x36);
    if (out.readUInt32LE(at) === 1) out.writeBigUInt64LE(out.readBigUInt64LE(at + 16) + shift, at + 16);
  }
  const shoff = Number(out.readBigUInt64LE(0x28));
  for (let i = 0; i < out.readUInt16LE(0x3c); i++) {
    const at = shoff + i * out.readUInt16LE(0x3a);
    const type = out.readUInt32LE(at + 4);
    if (type !== 2 && type !== 11) continue;
    const offset = Number(out.readBigUInt64LE(at + 24));
    const size = Number(out.readBigUInt64LE(at + 32));
    for (let sym = offset + 24; sym + 24 <= offset + size; sym += 24) {
      const shndx = out.readUInt16LE(sym + 6);
      if (shndx !== 0 && shndx < 0xff00) out.writeBigUInt64LE(out.readBigUInt64LE(sym + 8) + shift, sym + 8);
    }
  }
  return out;
}

test('a library whose addresses pass 2^52 names every offset as the same library below it', async (t) => {
  if (!needCommand(t, 'gcc', 'gcc')) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-elf-functions-'));
  try {
    const full = readFileSync(buildNativeLib(dir).full);
    const low = await readFunctionTable(bytesSource(full));
    const high = await readFunctionTable(bytesSource(shifted(full, 1n << 60n)));
    // The same bytes at an odd address: the symbol table is read word by word instead of through a view.
    const odd = await readFunctionTable(bytesSource(Buffer.concat([Buffer.alloc(1), full]).subarray(1)));
    assert.ok(low.size > 5, `${low.size} functions`);
    assert.equal(high.size, low.size);
    let named = 0;
    for (let offset = 0n; offset < BigInt(full.length); offset++) {
      const hit = low.lookup(offset);
      assert.deepEqual(high.lookup(offset), hit, `offset ${offset}`);
      assert.deepEqual(odd.lookup(offset), hit, `offset ${offset}`);
      if (hit?.name === 'profcpu_hot_inner') named++;
    }
    assert.ok(named > 0, 'profcpu_hot_inner names some offsets');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('kallsyms: of symbols at one address the last listed wins, ends are the next address, in both forms', () => {
  const text = [
    'ffffffff81000000 T _stext',
    'ffffffff81000000 t startup_64',
    'ffffffff81000100 W weak_one',
    'ffffffff81000100 T strong_one\t[mod]',
    'ffffffff81000200 d not_code',
    'ffffffff81000300 t last',
    '0000000000000000 T hidden',
  ].join('\n');
  // A symbol at 0x1000 makes the addresses span more than 2^52: the table is built as objects then.
  // Listed backwards too: the lowest address is not the first one read then.
  const backwards = text.split('\n').slice(0, 5).reverse().concat(text.split('\n').slice(5)).join('\n');
  for (const extra of ['', '\n0000000000001000 T low']) {
    const table = kallsymsTable(Buffer.from(text + extra));
    assert.deepEqual(
      kallsymsTable(Buffer.from(backwards + extra)).lookup(0xffffffff81000304n),
      table.lookup(0xffffffff81000304n),
    );
    assert.deepEqual(table.lookup(0xffffffff81000004n), { name: 'startup_64', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffff81000104n), { name: 'strong_one', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffff81000204n), { name: 'strong_one', offset: 0x104n });
    // The last symbol ends a page past its page.
    assert.deepEqual(table.lookup(0xffffffff81001fffn), { name: 'last', offset: 0x1cffn });
    assert.equal(table.lookup(0xffffffff81002000n), undefined);
    assert.deepEqual(
      table.lookup(0xffffffff80ffffffn),
      extra ? { name: 'low', offset: 0xffffffff80ffefffn } : undefined,
    );
  }
});

test('perf map ranges: of two at one address the one with fewer leading underscores wins, in both forms', () => {
  const map = '7f0000001000 100 A::Run()\n7f0000001000 80 __B\n7f0000002000 10 [stub] C\n';
  // A range at 0x10 makes the starts span more than 2^52: the table is built as objects then.
  for (const extra of ['', '10 20 low\n']) {
    const table = perfMapFunctions(Buffer.from(map + extra));
    assert.deepEqual(table.lookup(0x7f0000001090n), { name: 'A::Run()', offset: 0x90n });
    assert.equal(table.lookup(0x7f0000001100n), undefined);
    assert.deepEqual(table.lookup(0x7f000000200fn), { name: '[stub] C', offset: 0xfn });
    assert.deepEqual(table.lookup(0x2fn), extra ? { name: 'low', offset: 0x1fn } : undefined);
  }
});

test('of two names at one address perf keeps the longer in bytes (strlen), in both forms', async (t) => {
  if (!needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'nm', 'binutils')) return;
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-elf-functions-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // `aé` is 2 UTF-16 units and 3 bytes; `bcd` 3 of each: perf names the function `aé` (checked with perf 6.1).
  const source = join(dir, 'alias.c');
  writeFileSync(
    source,
    'volatile unsigned long sink;\n' +
      '__attribute__((noinline)) void aé(void) { for (unsigned long i = 0; i < 1000UL; i++) sink += i; }\n' +
      'void bcd(void) __attribute__((alias("aé")));\n' +
      'int main(void) { aé(); return 0; }\n',
  );
  const program = join(dir, 'alias');
  execFileSync('gcc', ['-O1', '-no-pie', '-fno-pie', '-o', program, source]);
  const line = execFileSync('nm', [program], { encoding: 'utf8' })
    .split('\n')
    .find((entry) => entry.endsWith(' bcd'))!;
  // -no-pie: the first load segment maps offset 0 at 0x400000.
  const offset = BigInt(`0x${line.split(' ')[0]}`) - 0x400000n;
  const elf = readFileSync(program);
  for (const bytes of [elf, shifted(elf, 1n << 52n)]) {
    const table = await readFunctionTable(bytesSource(bytes));
    assert.equal(table.lookup(offset)?.name, 'aé');
  }
});

test('kallsyms: a line whose address is no hex number names nothing and fails nothing, in both forms', () => {
  const text = ['ffffffff81000000 T first', 'zzzz T forged', 'ffffffff81000100 T second'].join('\n');
  for (const extra of ['', '\n0000000000001000 T low']) {
    const table = kallsymsTable(Buffer.from(text + extra));
    assert.deepEqual(table.lookup(0xffffffff81000004n), { name: 'first', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffff81000104n), { name: 'second', offset: 4n });
  }
});

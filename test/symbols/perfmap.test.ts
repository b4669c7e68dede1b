import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePerfMap, parsePerfMapLine } from '../../src/symbols/perfmap.js';

// Lines as .NET 10 writes them (`%p` start, hex size), plus the spellings other writers use.
const text = [
  '0x7fc077e20000 110 stub InitThreadManagerPerfMapData<JIT_CopiedWriteBarriers>',
  '0x7fc078e75c80 2a6 void [System.Private.CoreLib] System.Collections.Generic.GenericArraySortHelper`1[System.Int32]::IntroSort(valuetype System.Span`1<!0>,int32)[OptimizedTier1]',
  '7FC078E7A800 1A0 int32 [NamingExp] NamingExp.Work::Sort(int32)[OptimizedTier1]',
  '0X7fc078e7b000 0x40 instance void [App] App.Outer+Inner`2[System.String,System.Int32]::<Run>b__0_0(!!0)[QuickJitted]',
  '',
  '0x7fc078e7a800 1a0 int32 [NamingExp] NamingExp.Work::Sort(int32)[OptimizedTier1]',
].join('\r\n');

test('parses starts with or without 0x, either case, names with spaces, CRLF, duplicates kept in order', () => {
  const result = parsePerfMap(text + '\n');
  assert.equal(result.skipped, 0);
  assert.equal(result.truncated, false);
  assert.equal(result.symbols.length, 5);
  assert.deepEqual(result.symbols[0], {
    start: 0x7fc077e20000n,
    size: 0x110n,
    name: 'stub InitThreadManagerPerfMapData<JIT_CopiedWriteBarriers>',
  });
  assert.equal(result.symbols[2]!.start, 0x7fc078e7a800n);
  assert.equal(result.symbols[2]!.size, 0x1a0n);
  assert.equal(result.symbols[3]!.size, 0x40n);
  assert.match(result.symbols[3]!.name, /Outer\+Inner`2\[System\.String,System\.Int32\]::<Run>b__0_0\(!!0\)/);
  assert.deepEqual(result.symbols[4], result.symbols[2]);
});

test('drops a last line cut short and says so', () => {
  const result = parsePerfMap(text + '\n0x7fc078e7c000 1');
  assert.equal(result.symbols.length, 5);
  assert.equal(result.truncated, true);
  assert.equal(result.skipped, 0);
});

test('counts malformed lines and zero sizes', () => {
  const result = parsePerfMap('garbage\n0x10 0 zero-sized\n0x10\n0x10 zz name\n0x20 10 ok\n');
  assert.equal(result.skipped, 4);
  assert.deepEqual(result.symbols, [{ start: 0x20n, size: 0x10n, name: 'ok' }]);
  assert.equal(parsePerfMapLine('0x20 10   '), undefined);
});

test('an empty file is no symbols, not an error', () => {
  assert.deepEqual(parsePerfMap(''), { symbols: [], skipped: 0, truncated: false });
});

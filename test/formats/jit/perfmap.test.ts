import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parsePerfMap, parsePerfMapLine } from '../../../src/formats/jit/perfmap.js';

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

// The text parser perfmap.ts had before it read bytes: the reference the byte reader must agree with, line for line.
function reference(text: string) {
  const result = { symbols: [] as ReturnType<typeof parsePerfMapLine>[], skipped: 0, truncated: false };
  const lines = text.split('\n');
  if (lines.pop()!.trim() !== '') result.truncated = true;
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') continue;
    const symbol = parsePerfMapLine(line);
    if (symbol) result.symbols.push(symbol);
    else result.skipped++;
  }
  return result;
}

test('reads bytes exactly as the line pattern reads text: random lines, odd spellings, white space, not ASCII', () => {
  // Each field right three times in four, else spelt oddly.
  const starts = [
    ['0x7f00', '0X7fA0', '7f00', 'ABCDEF', '0', 'ffffffffffffffff'],
    ['0x', '', '0x0', '1'.repeat(17), 'g1'],
  ];
  const gaps = [
    [' ', '   '],
    ['\t', '', ' \t'],
  ];
  const sizes = [
    ['10', '0x20', '0X1', 'FFFFFFFFFFFFFFFF'],
    ['0', 'zz', '10000000000000000', '00'],
  ];
  const names = [
    ['void [App] App.P::Main()[QuickJitted]', 'Größe::Überall()', '名前', 'trail  ', '\x00nul', 'a\u00a0b'],
    [' x', '\tx', '\x0bx', 'trail\t', 'a\rb', '\u00a0lead', 'trail\u00a0', 'trail\u3000', 'a\u2028b', '\ufeffbom', ''],
  ];
  const ends = ['\n', '\r\n', '\r\r\n', ' \n', '\t\n'];
  const blanks = ['\n', '   \n', '\t\n', '\r\n', '\u00a0\n', '\u3000 \n', '\ufeff\n'];
  let seed = 7;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return (seed >>> 8) % n;
  };
  const pick = <T>(list: readonly T[]): T => list[random(list.length)]!;
  const field = (choices: readonly (readonly string[])[]) => pick(choices[random(4) === 0 ? 1 : 0]!);
  for (const ascii of [true, false]) {
    const asciiOnly = (s: string) => !ascii || /^[\x00-\x7f]*$/.test(s);
    const keep = (list: readonly string[]) => list.filter((s) => asciiOnly(s) && !(ascii && s.includes('\r')));
    const nameChoices = names.map(keep);
    for (let round = 0; round < 50; round++) {
      let text = '';
      for (let i = 0; i < 40; i++) {
        text +=
          random(9) === 0
            ? pick(keep(blanks))
            : field(starts) + field(gaps) + field(sizes) + field(gaps) + field(nameChoices) + pick(keep(ends));
      }
      if (round % 2)
        text += field(starts) + ' ' + field(sizes); // a last line cut short
      else if (round % 4 === 0) text += pick(keep(blanks)).trimEnd();
      assert.deepEqual(parsePerfMap(text), reference(text), JSON.stringify(text));
    }
  }
});

test('bytes that are not UTF-8 read as their decoded text would', () => {
  const bytes = Buffer.concat([
    Buffer.from('0x10 10 bad \xff byte\n', 'latin1'),
    Buffer.from('0x20 10 cut '),
    Buffer.from([0xe2, 0x80]),
    Buffer.from('\n0x30 10 ok\n'),
  ]);
  const result = parsePerfMap(bytes);
  assert.deepEqual(result, reference(bytes.toString('utf8')));
  assert.deepEqual(
    result.symbols.map((s) => s.name),
    ['bad \ufffd byte', 'cut \ufffd', 'ok'],
  );
});

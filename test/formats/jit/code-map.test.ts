import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CodeMap } from '../../../src/formats/jit/code-map.js';
import { SymbolTable } from '../../../src/formats/jit/symbol-table.js';
import { readPerfMap } from '../../../src/formats/jit/perfmap.js';

const s = (start: number, size: number, name: string) => ({ start: BigInt(start), size: BigInt(size), name });

test('finds the range holding an address, nothing in gaps or at an end', () => {
  const map = new CodeMap([s(0x100, 0x10, 'a'), s(0x200, 0x20, 'b')]);
  assert.equal(map.lookup(0x100n)?.name, 'a');
  assert.equal(map.lookup(0x10fn)?.name, 'a');
  assert.equal(map.lookup(0x110n), undefined);
  assert.equal(map.lookup(0xffn), undefined);
  assert.equal(map.lookup(0x21fn)?.name, 'b');
  assert.equal(map.lookup(0x220n), undefined);
});

test('the later range wins where ranges overlap, the older one keeps the rest', () => {
  // old [0x100, 0x200), newer [0x140, 0x180) inside it, newest [0x170, 0x210) across its end.
  const map = new CodeMap([s(0x100, 0x100, 'old'), s(0x140, 0x40, 'newer'), s(0x170, 0xa0, 'newest')]);
  const at = (a: number) => map.lookup(BigInt(a))?.name;
  assert.equal(at(0x100), 'old');
  assert.equal(at(0x13f), 'old');
  assert.equal(at(0x140), 'newer');
  assert.equal(at(0x16f), 'newer');
  assert.equal(at(0x170), 'newest');
  assert.equal(at(0x1ff), 'newest');
  assert.equal(at(0x20f), 'newest');
  assert.equal(at(0x210), undefined);
  // An older range listed after a newer one covering it is hidden entirely.
  const hidden = new CodeMap([s(0x100, 0x100, 'new-first'), s(0x140, 0x10, 'x'), s(0x100, 0x100, 'again')]);
  assert.equal(hidden.lookup(0x145n)?.name, 'again');
  assert.equal(hidden.size, 1);
});

test('agrees with a brute-force later-wins scan on random overlapping ranges', () => {
  let seed = 42;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const symbols = Array.from({ length: 300 }, (_, i) => s(random(4000), 1 + random(200), `m${i}`));
  const map = new CodeMap(symbols);
  for (let a = 0; a < 4300; a++) {
    let expected: string | undefined;
    for (const sym of symbols) if (BigInt(a) >= sym.start && BigInt(a) < sym.start + sym.size) expected = sym.name;
    assert.equal(map.lookup(BigInt(a))?.name, expected, `at ${a}`);
  }
});

test('ignores ranges of size 0 and copes with none at all', () => {
  assert.equal(new CodeMap([s(0x10, 0, 'empty')]).lookup(0x10n), undefined);
  assert.equal(new CodeMap([]).lookup(0n), undefined);
});

test('full 64-bit addresses near the top of the space are exact; a range 2^53 bytes above the lowest is ignored', () => {
  const high = 0xffff_ffff_ffff_f000n;
  const map = new CodeMap([
    { start: high, size: 0x10n, name: 'top' },
    { start: high - 0x20n, size: 0x10n, name: 'below' },
  ]);
  assert.equal(map.lookup(high + 0xfn)?.name, 'top');
  assert.equal(map.lookup(high - 0x11n)?.name, 'below');
  assert.equal(map.lookup(high - 0x10n), undefined);
  const far = new CodeMap([s(0x1000, 0x10, 'low'), { start: 0x1000n + 2n ** 53n, size: 0x10n, name: 'far' }]);
  assert.equal(far.lookup(0x1000n + 2n ** 53n), undefined);
  assert.equal(far.lookup(0x1005n)?.name, 'low');
});

test('appendMissing adds, in order, what the table lacks by start, size and name, as a set of keys would', () => {
  let seed = 11;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return (seed >>> 8) % n;
  };
  const names = ['a', 'b', 'void [A] A::M()[PreJIT]', 'Größe', 'x[PreJit-cold]', 'big'];
  const line = () =>
    `${(0x1000 + random(8) * 0x10).toString(16)} ${(1 + random(3)).toString(16)} ${names[random(6)]}\n`;
  for (let round = 0; round < 30; round++) {
    // Byte-backed names (ASCII, read from a map) and string ones (not ASCII, or given as objects) on both sides.
    const perf = readPerfMap(Array.from({ length: random(40) }, line).join('')).symbols;
    const more = Array.from({ length: 1 + random(40) }, line).join('');
    const other = round % 2 ? readPerfMap(more).symbols : SymbolTable.of(readPerfMap(more).symbols.toArray());
    const key = (s: { start: bigint; size: bigint; name: string }) => `${s.start} ${s.size} ${s.name}`;
    const known = new Set(perf.toArray().map(key));
    const expected = [...perf.toArray(), ...other.toArray().filter((s) => !known.has(key(s)))];
    const before = perf.length;
    assert.equal(perf.appendMissing(other), expected.length - before);
    assert.deepEqual(perf.toArray(), expected);
    const tagged = other.toArray().filter((s) => s.name.endsWith('[PreJIT]') || s.name.endsWith('[PreJit-cold]'));
    assert.equal(other.countNamesEndingWith(['[PreJIT]', '[PreJit-cold]']), tagged.length);
  }
});

test('a table of many ranges, clustered and nested, agrees with a brute-force later-wins scan', () => {
  let seed = 5;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return (seed >>> 8) % n;
  };
  const symbols = Array.from({ length: 3000 }, (_, i) =>
    s(random(2) ? random(500) * 8 : random(4000), random(10) === 0 ? 0 : 1 + random(i % 7 === 0 ? 600 : 40), `m${i}`),
  );
  const text = symbols.map((x) => `${x.start.toString(16)} ${x.size.toString(16)} ${x.name}\n`).join('');
  const map = new CodeMap(readPerfMap(text).symbols);
  for (let a = 0; a < 4700; a++) {
    let expected: string | undefined;
    for (const sym of symbols) if (BigInt(a) >= sym.start && BigInt(a) < sym.start + sym.size) expected = sym.name;
    assert.equal(map.lookupName(BigInt(a)), expected, `at ${a}`);
  }
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { cutMarker, LongLineCutter } from '../../src/stacks/long-lines.js';

function run(text: string, chunkSizes: (i: number) => number, max = 32, tail = 8): { out: string; cut: number } {
  const cutter = new LongLineCutter(max, tail);
  const input = Buffer.from(text);
  const parts: Buffer[] = [];
  for (let at = 0, i = 0; at < input.length; i++) {
    const size = Math.max(1, chunkSizes(i));
    parts.push(cutter.cut(input.subarray(at, at + size)));
    at += size;
  }
  parts.push(cutter.end());
  return { out: Buffer.concat(parts).toString(), cut: cutter.linesCut };
}

const frame = (name: string) => `\t55d0 ${name}+0x10 (/lib/x.so)`;
const marker = cutMarker.toString();
const text = ['short line', frame('A'.repeat(100)), frame('ok'), '', frame('B'.repeat(33)), 'end'].join('\n');

function expected(max: number, tail: number): string {
  return text
    .split('\n')
    .map((line) => (line.length > max ? `${line.slice(0, max)}${marker}${line.slice(line.length - tail)}` : line))
    .join('\n');
}

test('overlong lines keep their head, a marker and their tail; others pass as they are', () => {
  const whole = run(text, () => text.length);
  assert.equal(whole.out, expected(32, 8));
  assert.equal(whole.cut, 2);
  assert.match(whole.out, /\(\/lib\/x\.so\)\n/);
});

test('the same result whatever the chunking: 1 byte, random sizes', () => {
  assert.equal(run(text, () => 1).out, expected(32, 8));
  let seed = 7;
  const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), (seed % 17) + 1);
  for (let round = 0; round < 50; round++) assert.equal(run(text, random).out, expected(32, 8));
});

test('a chunk without long lines is passed on uncopied', () => {
  const cutter = new LongLineCutter(32, 8);
  const chunk = Buffer.from('a\nb\nc\n');
  assert.equal(cutter.cut(chunk), chunk);
});

test('an 8 MB name becomes a line of about 16 KiB', () => {
  const cutter = new LongLineCutter();
  const line = Buffer.from(`${frame('N'.repeat(8 << 20))}\n`);
  let out = 0;
  for (let at = 0; at < line.length; at += 65536) out += cutter.cut(line.subarray(at, at + 65536)).length;
  assert.ok(out < 17 << 10, `${out} bytes`);
  assert.equal(cutter.linesCut, 1);
});

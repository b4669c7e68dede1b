import assert from 'node:assert/strict';
import { test } from 'node:test';
import { encodeText, fixedText, TextSink } from '../../src/render/text-sink.js';

/** Numbers that reach every branch: integers, hundredths with and without a trailing zero, halves, the odd ones. */
const numbers = [
  0,
  -0,
  1,
  9,
  10,
  99,
  100,
  1234567,
  2 ** 53 - 1,
  2 ** 53,
  1e21,
  0.1,
  0.05,
  0.005,
  0.004,
  1.5,
  1.25,
  1.999,
  10.07,
  12.3456,
  1180 / 7,
  0.1 + 0.2,
  -1.5,
  -0.004,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  1e300,
  5e-324,
];

test('numbers are written digit by digit exactly as the string functions print them', () => {
  for (const n of numbers) {
    const sink = new TextSink(16);
    sink.reserve(64);
    sink.number(n);
    assert.equal(sink.toString(), String(n), `number(${n})`);
    const fixed = new TextSink(16);
    fixed.reserve(64);
    fixed.fixed(n);
    assert.equal(fixed.toString(), fixedText(n), `fixed(${n})`);
  }
  assert.equal(fixedText(12.3456), '12.35');
  assert.equal(fixedText(10.07), '10.07');
  assert.equal(fixedText(1.5), '1.5');
});

test('pieces, prefixes and text grow the buffer past its first size and keep UTF-8 intact', () => {
  const sink = new TextSink(1);
  const short = encodeText('<g x="');
  const long = encodeText(`${'é'.repeat(40)}🔥`);
  let expected = '';
  for (let i = 0; i < 5000; i++) {
    sink.reserve(short.length + long.length + 64);
    sink.piece(short);
    sink.number(i);
    sink.prefix(long, i % 2 === 0 ? long.length : 10);
    sink.append(' ünï ');
    expected += `<g x="${i}${i % 2 === 0 ? `${'é'.repeat(40)}🔥` : 'é'.repeat(5)} ünï `;
  }
  assert.equal(sink.toString(), expected);
});

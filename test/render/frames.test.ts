import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  describeFrame,
  escapeXml,
  jsonForScript,
  sanitizeText,
  styleCodes,
  styleOfCode,
  truncateText,
} from '../../src/render/frames.js';

test('annotations give the style and leave the name', () => {
  assert.deepEqual(describeFrame('Program::Main_[j]'), { name: 'Program::Main', style: 'managed' });
  assert.deepEqual(describeFrame('do_syscall_64_[k]'), { name: 'do_syscall_64', style: 'kernel' });
  assert.deepEqual(describeFrame('Math::Sqrt_[i]'), { name: 'Math::Sqrt', style: 'inline' });
  assert.deepEqual(describeFrame('memcpy'), { name: 'memcpy', style: 'native' });
  assert.deepEqual(describeFrame('x_[q]'), { name: 'x_[q]', style: 'native' });
  assert.deepEqual(describeFrame('_[j]'), { name: '_[j]', style: 'native' });
});

test('bracketed names are unknown, but .NET names that merely start and end in brackets are not', () => {
  assert.equal(describeFrame('[unknown]').style, 'unknown');
  assert.equal(describeFrame('[libcoreclr.so]').style, 'unknown');
  assert.equal(describeFrame('[unknown]_[k]').style, 'unknown');
  assert.equal(describeFrame('[System.Private.CoreLib] System.String::Concat[OptimizedTier1]').style, 'native');
  assert.equal(describeFrame('[System.Private.CoreLib] System.String::Concat[OptimizedTier1]_[j]').style, 'managed');
  assert.equal(describeFrame('[]').style, 'native');
});

test('style codes round-trip', () => {
  for (const [style, code] of Object.entries(styleCodes)) assert.equal(styleOfCode(code), style);
  assert.equal(styleOfCode(undefined), 'native');
});

test('sanitize strips controls, noncharacters and lone surrogates, keeps pairs and other text', () => {
  assert.equal(sanitizeText('a\u0000b\tc\nd\u001b[0m\u007f\u0085\ufffe\uffffe'), 'abcd[0me');
  assert.equal(sanitizeText('x\ud800y\udc00z'), 'xyz');
  assert.equal(sanitizeText('🔥 日本 Ü'), '🔥 日本 Ü');
  assert.equal(sanitizeText('plain'), 'plain');
});

test('truncate cuts to fit with `..`, never in a surrogate pair, and gives up below 3 characters', () => {
  assert.equal(truncateText('abcdef', 6), 'abcdef');
  assert.equal(truncateText('abcdefg', 6), 'abcd..');
  assert.equal(truncateText('abcdefg', 2), '');
  assert.equal(truncateText('ab🔥cd', 5), 'ab..');
  assert.equal(truncateText('a🔥cdef', 5), 'a🔥..');
});

test('escape covers the five markup characters', () => {
  assert.equal(escapeXml(`<a href="x">&'</a>`), '&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;');
  assert.equal(escapeXml('plain'), 'plain');
});

test('JSON for scripts has no `<`, `>`, `&`, U+2028 or U+2029 and parses back to the same value', () => {
  const value = { n: '</script><!--]]>&\u2028\u2029', v: [1, 2] };
  const json = jsonForScript(value);
  assert.doesNotMatch(json, /[<>&\u2028\u2029]/);
  assert.deepEqual(JSON.parse(json), value);
});

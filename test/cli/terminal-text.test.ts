import assert from 'node:assert/strict';
import { test } from 'node:test';
import { terminalText } from '../../src/cli/terminal-text.js';
import { assertNoTerminalControl } from './terminal-control.js';

test('plain text, wide characters and emoji are left as they are', () => {
  for (const text of ['dotnet Shop.dll', 'Ünïcødé 名前', 'burn 🔥 x', '']) assert.equal(terminalText(text), text);
});

test('an OSC 8 hyperlink shows as text: no ESC, no BEL', () => {
  const link = '\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07';
  const shown = terminalText(link);
  assert.equal(shown, '\\x1b]8;;https://evil.example/\\x07click me\\x1b]8;;\\x07');
  assertNoTerminalControl(shown, 'the shown link');
});

test('CSI sequences (7-bit and the 8-bit C1 introducer), BEL and DEL show as \\xHH', () => {
  assert.equal(terminalText('\x1b[2J\x1b[31mred\x07'), '\\x1b[2J\\x1b[31mred\\x07');
  assert.equal(terminalText('\x9b2J\x7f\x85'), '\\x9b2J\\x7f\\x85');
  assert.equal(terminalText('\0\x01\x1f'), '\\x00\\x01\\x1f');
});

test('a newline cannot forge a row; CR and tab show too', () => {
  const forged = 'dotnet Shop.dll\n4242   1  .NET 8.0  yes 12K  dotnet Fake.dll';
  const shown = terminalText(forged);
  assert.equal(shown.split('\n').length, 1);
  assert.equal(shown, 'dotnet Shop.dll\\n4242   1  .NET 8.0  yes 12K  dotnet Fake.dll');
  assert.equal(terminalText('a\rb\tc'), 'a\\rb\\tc');
});

test('a backslash is doubled, so an escape in the output can only come from a control', () => {
  assert.equal(terminalText('C:\\x1b'), 'C:\\\\x1b');
  assert.notEqual(terminalText('\\x1b'), terminalText('\x1b'));
  assert.equal(terminalText('a\\b', { escapeBackslash: false }), 'a\\b');
});

test('bidi overrides and isolates show as \\uHHHH', () => {
  // "exe.txt" shown reversed as "txt.exe" on a bidi-aware terminal.
  assert.equal(terminalText('report\u202etxt.exe'), 'report\\u202etxt.exe');
  assert.equal(
    terminalText('\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069'),
    '\\u202a\\u202b\\u202c\\u202d\\u2066\\u2067\\u2068\\u2069',
  );
});

test('lone surrogates show as \\uHHHH; a pair is one character and stays', () => {
  assert.equal(terminalText('a\ud800b\udfffc'), 'a\\ud800b\\udfffc');
  assert.equal(terminalText('\ud83d\udd25'), '🔥');
});

test('keep lets chosen controls through and nothing else', () => {
  assert.equal(terminalText('a\tb\nc\x1b', { keep: '\t' }), 'a\tb\\nc\\x1b');
});

test('maxLength cuts long names with an ellipsis, counting code points, never inside an escape', () => {
  const long = `System.Collections.Generic.Dictionary\`2[${'System.String,'.repeat(20)}]::TryInsert`;
  const shown = terminalText(long, { maxLength: 40 });
  assert.equal([...shown].length, 40);
  assert.equal(shown, `${long.slice(0, 39)}…`);
  assert.equal(terminalText('abc', { maxLength: 3 }), 'abc');
  assert.equal(terminalText('abcd', { maxLength: 3 }), 'ab…');
  assert.equal(terminalText('🔥🔥🔥', { maxLength: 3 }), '🔥🔥🔥');
  assert.equal(terminalText('🔥🔥🔥🔥', { maxLength: 3 }), '🔥🔥…');
  // `\x1b` would cross the limit: it is left out whole.
  assert.equal(terminalText('ab\x1bcd', { maxLength: 5 }), 'ab…');
  assert.equal(terminalText('ab\x1bcd', { maxLength: 7 }), 'ab\\x1b…');
  assert.equal(terminalText('abc', { maxLength: 0 }), '');
});

test('a hostile name of every kind comes out with no terminal control', () => {
  const hostile =
    '\x1b]8;;https://evil.example/\x07x\x1b]8;;\x07\x1b[2J\x1bP+q\x1b\\\x07\n\r\x9b1;1H\x9d0;title\x9c\u202e\ud800';
  assertNoTerminalControl(terminalText(hostile), 'the shown name');
  assertNoTerminalControl(terminalText(hostile, { maxLength: 12 }), 'the shown name, cut');
  assert.doesNotMatch(terminalText(hostile), /\n/);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reporterLine } from '../../src/cli/reporter.js';
import { assertNoTerminalControl } from './terminal-control.js';

test('a reporter line is the message and one newline', () => {
  assert.equal(
    reporterLine('recording for 10 s at 99 Hz (cpu-clock); Ctrl-C stops early'),
    'recording for 10 s at 99 Hz (cpu-clock); Ctrl-C stops early\n',
  );
});

test('a message quoting a hostile target carries no escape sequence and no forged line', () => {
  const cmdline =
    'dotnet \x1b]8;;https://evil.example/\x07Shop\x1b]8;;\x07.dll\x1b[2J\x9b1;1H\u202e\nprofcpu: warning: forged';
  const line = reporterLine(`profiling process 4242 (${cmdline}): PID 4242 was given`);
  assertNoTerminalControl(line.slice(0, -1), 'the reporter line');
  assert.equal(line.split('\n').length, 2, 'one line and its newline');
  assert.match(line, /^profiling process 4242 \(dotnet \\x1b\]8;;https:\/\/evil\.example\/\\x07Shop/);
  assert.match(line, /\\u202e\\nprofcpu: warning: forged\): PID 4242 was given\n$/);
});

test('tabs and the leading newline that ends a progress line stay; backslashes are not doubled', () => {
  assert.equal(reporterLine('\nSIGINT: stopping\tnow'), '\nSIGINT: stopping\tnow\n');
  assert.equal(reporterLine('already escaped: a\\x1b'), 'already escaped: a\\x1b\n');
  assert.equal(reporterLine('a\r\x07b'), 'a\\r\\x07b\n');
});

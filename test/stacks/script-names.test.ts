// The FlameScope copy of perf script's text carries the names the resolver gives to perf's `[unknown]` frames, in
// chunks cut anywhere, leaving every other line byte for byte; and stays one line per frame whatever a name holds.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ScriptNamer } from '../../src/stacks/script-names.js';
import type { FrameResolver } from '../../src/stacks/frame-name.js';

const text = [
  '# ========',
  '# captured on    : Mon Nov 23 22:58:59 2026',
  'dotnet 100/101 [000] 12.000001: 10101010 cpu-clock:',
  '\t    7f0000001000 [unknown] (/memfd:doublemapper (deleted))',
  '\t    7f0000009000 [unknown] (/usr/lib/libx.so)',
  '\t    7f00000a0000 start_thread+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  '',
  'dotnet 200/201 [001] 12.000002: 10101010 cpu-clock:',
  '\t    7f0000001000 [unknown] (/memfd:doublemapper (deleted))',
  '',
  '',
].join('\n');

const calls: (number | undefined)[] = [];
const resolver: FrameResolver = {
  resolve({ pid, ip }) {
    calls.push(pid);
    if (ip !== 0x7f0000001000n) return undefined;
    return pid === 100
      ? { name: 'void [App] App.Program::Work(int32)[OptimizedTier1]', kind: 'jit' }
      : { name: 'App.Evil::Name\n\x1b[2Jforged', kind: 'jit' };
  },
};

function run(chunkSize: number): string {
  const namer = new ScriptNamer(resolver);
  const bytes = Buffer.from(text);
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += chunkSize) out.push(namer.transform(bytes.subarray(at, at + chunkSize)));
  out.push(namer.end());
  return Buffer.concat(out).toString('utf8');
}

test('unknown frames the resolver names are rewritten, per process; the rest is untouched', () => {
  const whole = run(1 << 20);
  const lines = whole.split('\n');
  assert.equal(lines[3], '\t    7f0000001000 App.Program::Work (/memfd:doublemapper (deleted))');
  assert.equal(lines[4], '\t    7f0000009000 [unknown] (/usr/lib/libx.so)');
  assert.equal(lines[8], '\t    7f0000001000 App.Evil::Name??[2Jforged (/memfd:doublemapper (deleted))');
  assert.equal(lines.length, text.split('\n').length, 'one line per frame');
  assert.deepEqual(
    whole.split('\n').filter((_, i) => i !== 3 && i !== 8),
    text.split('\n').filter((_, i) => i !== 3 && i !== 8),
  );
  assert.ok(calls.includes(100) && calls.includes(200));
});

test('chunks cut anywhere give the same text', () => {
  const whole = run(1 << 20);
  for (const size of [1, 7, 64]) assert.equal(run(size), whole, `chunks of ${size}`);
});

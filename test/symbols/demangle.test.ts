// The demangler against binutils' c++filt in perf's mode (no parameters, no verbose forms: `c++filt -p -i`): every
// C++ symbol of the node binary (tens of thousands: templates of templates, lambdas, local names, function pointers) is
// either written exactly as c++filt writes it, or left to the caller (undefined), never written differently.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { execa } from 'execa';
import { demangle } from '../../src/symbols/demangle.js';
import { needCommand } from '../support/requirements.js';

test('the C++ names of the node binary demangle as c++filt -p -i writes them, or not at all', async (t) => {
  if (!needCommand(t, 'nm', 'binutils') || !needCommand(t, 'c++filt', 'binutils')) return;
  const symbols = await execa('nm', ['--defined-only', process.execPath], { maxBuffer: 1 << 28 });
  const names = [
    ...new Set(
      symbols.stdout
        .split('\n')
        .map((line) => line.split(' ')[2] ?? '')
        .filter((name) => name.startsWith('_Z') && !name.includes('@')),
    ),
  ];
  assert.ok(names.length > 1000, `only ${names.length} C++ symbols in ${process.execPath}`);
  const expected = (await execa('c++filt', ['-p', '-i'], { input: names.join('\n'), maxBuffer: 1 << 28 })).stdout.split(
    '\n',
  );
  let covered = 0;
  const wrong: string[] = [];
  names.forEach((name, i) => {
    const ours = demangle(name);
    if (ours === undefined) return;
    covered++;
    if (ours !== expected[i]) wrong.push(`${name}\n  ours     ${ours}\n  c++filt  ${expected[i]}`);
  });
  assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} names written differently`);
  t.diagnostic(`${covered} of ${names.length} names demangled`);
  assert.ok(covered > names.length * 0.8, `only ${covered} of ${names.length} demangled`);
  // Not C++, or not a name: left alone.
  for (const name of ['main', '_Z', '_ZN', '_ZSt', 'x'.repeat(10_000)]) assert.equal(demangle(name), undefined);
  // perf prints a clone under its function's name.
  assert.equal(demangle('_ZN4node5StartEiPPc.cold'), 'node::Start');
});

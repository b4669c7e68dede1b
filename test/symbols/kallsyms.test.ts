// Placing the kernel's symbols as perf does when the kallsyms read is of another boot than the recording (KASLR puts
// the kernel elsewhere at each boot): the reference symbol perf.data's kernel mapping names (`_text`), found in the
// text as perf's kallsyms__get_function_start finds it, gives the delta by which the kernel's own symbols move, and
// modules' do not (perf's maps__split_kallsyms); in the columns and in the objects alike.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kallsymsAddress, kallsymsDelta, kallsymsTable } from '../../src/symbols/kallsyms.js';

const text = Buffer.from(
  [
    '0000000000000000 A fixed_percpu_data',
    'ffffffff83000000 T _stext',
    'ffffffff83000000 T _text',
    'ffffffff83001000 T profcpu_core',
    'ffffffff83002000 d profcpu_data',
    'ffffffff83003000 T _etext',
    'ffffffffc0001000 t profcpu_module\t[profmod]',
    'ffffffffc0002000 t profcpu_module_end\t[profmod]',
  ].join('\n'),
);

test('kallsymsAddress: the first function (or absolute) symbol of that name, a module’s not', () => {
  assert.equal(kallsymsAddress(text, '_text'), 0xffffffff83000000n);
  assert.equal(kallsymsAddress(text, 'fixed_percpu_data'), 0n);
  // Data is no function; a module's symbol has its module after its name.
  assert.equal(kallsymsAddress(text, 'profcpu_data'), undefined);
  assert.equal(kallsymsAddress(text, 'profcpu_module'), undefined);
  // The last line, without a newline.
  assert.equal(kallsymsAddress(Buffer.from('ffffffff81000000 T _text'), '_text'), 0xffffffff81000000n);
  assert.equal(kallsymsAddress(text, 'text'), undefined);
  assert.equal(kallsymsAddress(text, ''), undefined);
  // A name that only ends another, and a line whose "address" is no address, are no match.
  assert.equal(kallsymsAddress(Buffer.from('ffffffff81000000 T __text\nzz T _text\n'), '_text'), undefined);
});

test('kallsymsDelta: where the text’s kernel lay from the recording’s, modulo 2^64; undefined without the symbol', () => {
  assert.equal(kallsymsDelta(text, { name: '_text', address: 0xffffffff83000000n }), 0n);
  assert.equal(kallsymsDelta(text, { name: '_text', address: 0xffffffff81000000n }), 0x2000000n);
  assert.equal(kallsymsDelta(text, { name: '_text', address: 0xffffffff85000000n }), 2n ** 64n - 0x2000000n);
  assert.equal(kallsymsDelta(text, { name: '_nothere', address: 0xffffffff81000000n }), undefined);
});

test('kallsymsTable with a delta: the kernel’s own symbols move, its modules’ stay, in columns and objects', () => {
  // The recording's kernel lay 0x2000000 lower: its profcpu_core was at 0xffffffff81001000.
  for (const delta of [0x2000000n, 2n ** 64n - 0x2000000n]) {
    const sign = delta < 2n ** 63n ? -1n : 1n;
    const core = 0xffffffff83001004n + sign * 0x2000000n;
    // A low symbol makes the span too wide for the columns: the same table as objects.
    for (const extra of ['', '\n0000000000001000 T profcpu_low']) {
      const table = kallsymsTable(Buffer.concat([text, Buffer.from(extra)]), delta);
      assert.deepEqual(table.lookup(core), { name: 'profcpu_core', offset: 4n }, `${delta} ${extra}`);
      assert.notEqual(table.lookup(0xffffffff83001004n)?.name, 'profcpu_core');
      assert.deepEqual(table.lookup(0xffffffffc0001004n), { name: 'profcpu_module', offset: 4n });
    }
  }
  // Moved past the top of the address space, an address wraps (perf's u64 arithmetic): only the objects hold it.
  const wrapped = kallsymsTable(Buffer.from('ffffffff83001000 T profcpu_core\n'), 2n ** 64n - 0x80000000n);
  assert.deepEqual(wrapped.lookup(0x3001004n), { name: 'profcpu_core', offset: 4n });
  assert.deepEqual(kallsymsTable(text, 0n).lookup(0xffffffff83001004n), { name: 'profcpu_core', offset: 4n });
});

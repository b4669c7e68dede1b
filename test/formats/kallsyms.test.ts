// Placing the kernel's symbols as perf does when the kallsyms read is of another boot than the recording (KASLR puts
// the kernel elsewhere at each boot): the reference symbol perf.data's kernel mapping names (`_text`), found in the
// text as perf's kallsyms__get_function_start finds it, gives the delta by which the kernel's own symbols move, and
// modules' do not (perf's maps__split_kallsyms); in the columns and in the objects alike.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { kallsymsAddress, kallsymsDelta, kallsymsTable } from '../../src/formats/kallsyms.js';

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

test('kallsymsTable: the kernel’s last symbol before its modules, and a module’s last before the kernel’s, end a page past their page', () => {
  // perf's symbols__fixup_end for kallsyms: the gap between the kernel and its modules belongs to no symbol.
  const lines = [
    'ffffffff81000000 T profcpu_first',
    'ffffffff81000800 T profcpu_last_core',
    'ffffffffc0001000 t profcpu_module\t[profmod]',
    'ffffffffc0001800 t profcpu_module_last\t[profmod]',
    'ffffffffff600000 T profcpu_after_modules',
  ];
  // As written, and with a low symbol that makes the span too wide for the columns: the same table as objects.
  for (const extra of ['', '\n0000000000001000 T profcpu_low']) {
    const table = kallsymsTable(Buffer.from(lines.join('\n') + extra));
    assert.deepEqual(table.lookup(0xffffffff81000004n), { name: 'profcpu_first', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffff81000ffcn), { name: 'profcpu_last_core', offset: 0x7fcn });
    assert.deepEqual(table.lookup(0xffffffff81001ffcn), { name: 'profcpu_last_core', offset: 0x17fcn }, extra);
    assert.equal(table.lookup(0xffffffff81002000n), undefined, extra);
    assert.equal(table.lookup(0xffffffffa0000000n), undefined, extra);
    assert.deepEqual(table.lookup(0xffffffffc0001004n), { name: 'profcpu_module', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffffc0002ffcn), { name: 'profcpu_module_last', offset: 0x17fcn });
    assert.equal(table.lookup(0xffffffffc0003000n), undefined, extra);
    assert.deepEqual(table.lookup(0xffffffffff600004n), { name: 'profcpu_after_modules', offset: 4n });
  }
});

test('kallsymsTable by perf 6.12’s rule: a module’s last symbol before another module’s ends a page past its page too', () => {
  const lines = [
    'ffffffffc0001000 t profcpu_a_first\t[profmod_a]',
    'ffffffffc0001800 t profcpu_a_last\t[profmod_a]',
    'ffffffffc0009000 t bpf_prog_profcpu\t[bpf]',
    'ffffffffc000a000 t profcpu_b\t[profmod_b]',
  ];
  for (const extra of ['', '\n0000000000001000 T profcpu_low']) {
    const text = Buffer.from(lines.join('\n') + extra);
    // perf 6.1: the modules are one group, each symbol ends at the next.
    assert.deepEqual(kallsymsTable(text, 0n, '6.1').lookup(0xffffffffc0008ffcn), {
      name: 'profcpu_a_last',
      offset: 0x77fcn,
    });
    const table = kallsymsTable(text, 0n, '6.12');
    assert.deepEqual(table.lookup(0xffffffffc0002ffcn), { name: 'profcpu_a_last', offset: 0x17fcn }, extra);
    assert.equal(table.lookup(0xffffffffc0003000n), undefined, extra);
    assert.deepEqual(table.lookup(0xffffffffc0001004n), { name: 'profcpu_a_first', offset: 4n });
    assert.deepEqual(table.lookup(0xffffffffc0009ffcn), { name: 'bpf_prog_profcpu', offset: 0xffcn });
  }
});

test('kallsymsTable with a delta that moves a kernel symbol below 0: it wraps, on the objects', () => {
  const table = kallsymsTable(
    Buffer.from('0000000000002000 T profcpu_low\nffffffffc0001000 t profcpu_m\t[m]\n'),
    0x3000n,
  );
  assert.deepEqual(table.lookup(0xfffffffffffff004n), { name: 'profcpu_low', offset: 4n });
  assert.deepEqual(table.lookup(0xffffffffc0001004n), { name: 'profcpu_m', offset: 4n });
});

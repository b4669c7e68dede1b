import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { foldStream, StackFolder, type FrameResolver } from '../../src/stacks/fold.js';
import { maxAddressedFrames } from '../../src/stacks/stack-table.js';

const fixtures = new URL('../fixtures/perf-script/', import.meta.url);

function foldText(text: string | Buffer, options = {}, resolver?: FrameResolver) {
  const warnings: string[] = [];
  const folder = new StackFolder(options, (m) => warnings.push(m), resolver);
  folder.write(typeof text === 'string' ? Buffer.from(text) : text);
  return { ...folder.end(), warnings };
}

const dotnetSample = [
  'dotnet 100/101 [000] 1.000000:   10101010 cpu-clock: ',
  '\t    7f0000001000 [unknown] (/memfd:doublemapper (deleted))',
  '\t    7f0000002000 [unknown] (/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/System.Private.CoreLib.dll)',
  '\t    7f0000003000 [unknown] (/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.0/libcoreclr.so)',
  '\t    7f0000004000 main+0x10 (/usr/bin/dotnet)',
  '',
  '',
].join('\n');

test('unnamed frames go to the resolver once per process and address; its names are made readable', () => {
  const calls: { pid: number | undefined; ip: bigint; dso: string }[] = [];
  const resolver: FrameResolver = {
    resolve(frame) {
      calls.push(frame);
      if (frame.ip === 0x7f0000001000n)
        return { name: 'void [App] App.Program::Work(int32)[OptimizedTier1]', kind: 'jit' };
      if (frame.ip === 0x7f0000002000n)
        return {
          name: 'instance void [System.Private.CoreLib] System.Threading.Thread::StartCallback()',
          kind: 'readytorun',
        };
      return undefined;
    },
  };
  const result = foldText(dotnetSample + dotnetSample, {}, resolver);
  assert.deepEqual(
    [...result.stacks],
    [['dotnet;main;[libcoreclr.so];System.Threading.Thread::StartCallback_[j];App.Program::Work_[j]', 2]],
  );
  assert.equal(calls.length, 3);
  assert.deepEqual(calls[0], { pid: 100, ip: 0x7f0000001000n, dso: '/memfd:doublemapper (deleted)' });
  assert.deepEqual(result.quality, {
    samples: 2,
    fullyNamed: 0,
    fullyNamedExceptCoreclr: 2,
    // The unnamed frame is libcoreclr.so's: the app's and the framework's frames are all named.
    fullyNamedExceptLibraries: 2,
    unnamedLibraries: { 'libcoreclr.so': 2 },
    framesByKind: { jit: 2, readytorun: 2, native: 2, 'native-unnamed': 2, kernel: 0, unknown: 0 },
    samplesByLeafKind: { jit: 2, readytorun: 0, native: 0, 'native-unnamed': 0, kernel: 0, unknown: 0 },
    // The chain stops at main, in /usr/bin/dotnet: no thread start above it.
    brokenChains: 2,
    brokenChainsByFile: { dotnet: 2 },
  });
});

test('without a resolver, unnamed frames are named after their file and count as unnamed', () => {
  const result = foldText(dotnetSample);
  assert.deepEqual(
    [...result.stacks.keys()],
    ['dotnet;main;[libcoreclr.so];[System.Private.CoreLib.dll];[memfd:doublemapper]'],
  );
  assert.equal(result.quality.fullyNamed, 0);
  assert.equal(result.quality.fullyNamedExceptCoreclr, 0);
  // A .NET image and JIT memory without names are the app's and framework's own: not forgiven as a library.
  assert.equal(result.quality.fullyNamedExceptLibraries, 0);
  assert.deepEqual(result.quality.unnamedLibraries, { 'libcoreclr.so': 1 });
  assert.equal(result.quality.samplesByLeafKind.unknown, 1);
});

test('`;` inside a name never splits a frame; nested `+` types stay whole', () => {
  const result = foldText(
    'app 1 1.0: 1 cpu-clock:\n\t 7f01 instance void [A] A.Outer+Inner::M;N()[Optimized] (/tmp/perf-1.map)\n\n',
  );
  assert.deepEqual([...result.stacks.keys()], ['app;A.Outer+Inner::M:N_[j]']);
});

test('bad lines are counted by kind and warned once each; nothing throws', () => {
  const junk = Buffer.alloc(5000);
  for (let i = 0; i < junk.length; i++) junk[i] = (i * 7919) % 251;
  const text = Buffer.concat([
    Buffer.from('noise line\nnoise again\n\t ffff frame-before-any-sample (x)\n'),
    junk,
    Buffer.from('\n\nok 5 1.0: 1 cpu-clock:\n\t 10 f (/bin/ok)\n\nok 5 1.1: 1 cpu-clock:\n\t 10 f (/bin/ok)'),
  ]);
  const result = foldText(text);
  assert.deepEqual([...result.stacks], [['ok;f', 1]]);
  assert.equal(result.samples, 2);
  assert.equal(result.keptSamples, 1);
  assert.equal(result.skipped['truncated-sample'], 1);
  assert.ok((result.skipped['unrecognized-line'] ?? 0) >= 2);
  assert.equal(new Set(result.warnings).size, result.warnings.length);
  assert.equal(result.warnings.length, Object.keys(result.skipped).length);
});

test('the first event is kept unless one is named; periods weigh samples when asked', () => {
  const text = readFileSync(new URL('two-events.txt', fixtures));
  const first = foldText(text);
  assert.deepEqual(first.events, ['cpu-clock', 'task-clock']);
  assert.ok(first.keptSamples > 0 && first.keptSamples < first.samples);
  assert.equal(first.weight, first.keptSamples);
  assert.match(first.warnings[0]!, /cpu-clock/);
  const task = foldText(text, { eventFilter: 'task-clock', weight: 'period' });
  assert.equal(task.keptSamples + first.keptSamples, first.samples);
  assert.equal(task.weight, task.keptSamples * 10101010);
  const none = foldText(text, { eventFilter: 'cycles' });
  assert.equal(none.keptSamples, 0);
  assert.equal(none.stacks.size, 0);
});

test('a line longer than 1 MiB is dropped, not buffered', () => {
  const folder = new StackFolder();
  folder.write(Buffer.from('a 1 1.0: 1 cpu-clock:\n\t 10 f (/bin/a)\n'));
  const long = Buffer.alloc(64 * 1024, 0x41);
  for (let i = 0; i < 20; i++) folder.write(long);
  folder.write(Buffer.from('\n\t 20 g (/bin/a)\n\n'));
  const result = folder.end();
  assert.equal(result.skipped['overlong-line'], 1);
  assert.deepEqual([...result.stacks], [['a;g;f', 1]]);
});

test('foldStream reads an async iterable of chunks', async () => {
  async function* chunks() {
    yield Buffer.from('a 1 1.0: 1 cpu-clock:\n\t 10 lea');
    yield new TextEncoder().encode('f (/bin/a)\n\t 20 root (/bin/a)\n\n');
  }
  const result = await foldStream(chunks());
  assert.deepEqual([...result.stacks], [['a;root;leaf', 1]]);
});

test('a comm with spaces and digits stays whole when perf printed cpu or time after the tid', () => {
  const text = 'Worker 3 1234 [000] 5.500000: 1 cpu-clock:\n\t 10 f (/bin/w)\n\nx 7\n\t 10 g (/bin/x)\n\n';
  assert.deepEqual([...foldText(text, { includeTid: true }).stacks.keys()], ['Worker_3-?/1234;f', 'x-?/7;g']);
  // stackcollapse-perf.pl takes the shortest comm, and needs 2 bytes and a space after the numbers.
  assert.deepEqual([...foldText(text, { compat: true }).stacks.keys()], ['Worker;f']);
});

test('mutated input never throws, in either mode, whole or in chunks', () => {
  const source = readFileSync(new URL('dotnet-names.txt', fixtures));
  let seed = 7;
  const next = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed % n;
  };
  const resolver: FrameResolver = { resolve: (f) => (f.ip % 2n ? { name: '(odd)[x]', kind: 'jit' } : undefined) };
  for (let round = 0; round < 150; round++) {
    const bytes = Buffer.from(source);
    for (let k = 0; k < 1 + next(40); k++)
      bytes[next(bytes.length)] = [0, 9, 10, 13, 32, 40, 41, 59, 91, 93][next(10)]!;
    for (const compat of [false, true]) {
      const folder = new StackFolder({ compat, addrs: round % 2 === 0 }, () => {}, resolver);
      for (let at = 0; at < bytes.length;) {
        const size = 1 + next(64);
        folder.write(bytes.subarray(at, at + size));
        at += size;
      }
      const result = folder.end();
      assert.ok(result.keptSamples <= result.samples);
      for (const [stack, weight] of result.stacks) assert.ok(stack.length > 0 && weight > 0);
    }
  }
});

test('inline frames: `outer->inlined` gives two frames, the inlined one nearer the leaf and marked _[i]', () => {
  const text =
    'app 1 1.0: 1 cpu-clock:\n\t 10 leaf (/bin/a)\n\t 20 outer->inlined+0x8 (/bin/a)\n\t 30 ->main (/bin/a)\n\n';
  assert.deepEqual([...foldText(text).stacks.keys()], ['app;main;outer;inlined_[i];leaf']);
  assert.deepEqual([...foldText(text, { compat: true }).stacks.keys()], ['app;;main_[i];outer;inlined_[i];leaf']);
});

test('a zero return address with no mapping ends the stack in the readable mode; compat keeps it', () => {
  const text = [
    'dotnet 100/101 [000] 1.000000:   10101010 cpu-clock: ',
    '\t    7f0000004000 memmove+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
    '\t    7f0000005000 GCHeap::Alloc+0x20 (/usr/share/dotnet/libcoreclr.so)',
    '\t               0 [unknown] ([unknown])',
    '',
    '',
  ].join('\n');
  const readable = foldText(text);
  assert.deepEqual([...readable.stacks], [['dotnet;GCHeap::Alloc;memmove', 1]]);
  assert.equal(readable.quality.fullyNamed, 1);
  const compat = foldText(text, { compat: true });
  assert.deepEqual([...compat.stacks], [['dotnet;[unknown];GCHeap::Alloc;memmove', 10101010]]);
});

test('symbol versions perf appends to dynamic symbols are dropped in the readable mode; compat keeps them', () => {
  const text = [
    'app 1 1.000000: 1 cpu-clock:',
    '\t7f0000001000 pthread_cond_signal@@GLIBC_2.3.2+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
    '\t7f0000002000 std::__once_callable@GLIBCXX_3.4.11+0x1 (/usr/lib/libstdc++.so.6)',
    '\t7f0000003000 not_a_version@host+0x1 (/usr/lib/libx.so)',
    '',
    '',
  ].join('\n');
  assert.deepEqual(
    [...foldText(text).stacks.keys()],
    ['app;not_a_version@host;std::__once_callable;pthread_cond_signal'],
  );
  assert.deepEqual(
    [...foldText(text, { compat: true }).stacks.keys()],
    ['app;not_a_version@host;std::__once_callable@GLIBCXX_3.4.11;pthread_cond_signal@@GLIBC_2.3.2'],
  );
});

test('writeLine folds a whole line as write() folds it with its newline, also after a partial chunk', () => {
  const text =
    'app 1 [000] 1.0: 1 cpu-clock:\n\t 10 f (/bin/app)\n\t 20 g (/bin/app)\n\n' +
    'app 2 [001] 1.1: 1 cpu-clock:\n\t 10 f (/bin/app)\n\n' +
    'other 3 [000] 1.2: 1 task-clock:\n\t 30 h (/bin/other)\n\n';
  const lines = text.split('\n').slice(0, -1);
  const whole = new StackFolder();
  whole.write(Buffer.from(text));
  const byLine = new StackFolder();
  const cut = new StackFolder();
  for (const [i, line] of lines.entries()) {
    const padded = Buffer.from(`<${line}>`);
    byLine.writeLine(padded, 1, padded.length - 1);
    // A chunk ending inside the line before: writeLine must finish that line first.
    if (i % 2 === 0) cut.writeLine(padded, 1, padded.length - 1);
    else if (line.length > 3) {
      cut.write(Buffer.from(line.slice(0, 3)));
      const rest = Buffer.from(line.slice(3));
      cut.writeLine(rest, 0, rest.length);
    } else cut.writeLine(padded, 1, padded.length - 1);
  }
  const expected = whole.end();
  assert.equal(expected.keptSamples, 2);
  assert.deepEqual(byLine.end(), expected);
  assert.deepEqual(cut.end(), expected);
});

test('call chains that stop short of a thread start are counted, by the file of the last frame in a known place', () => {
  const sample = (frames: string[]) =>
    ['app 10/11 [000] 1.000000: 1 cpu-clock:', ...frames.map((f) => `\t${f}`), '', ''].join('\n');
  const whole = sample([
    '7f0000001000 work+0x10 (/srv/app)',
    '7f0000002000 start_thread+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  ]);
  const kernelOnly = sample(['ffffffff81000000 schedule+0x10 ([kernel.kallsyms])']);
  // perf read a return address where `read` keeps no frame pointer: an address in no mapping.
  const cutInLibc = sample([
    'ffffffff81000000 ksys_read+0x10 ([kernel.kallsyms])',
    '7f0000003000 read+0x10 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
    '1234 [unknown] ([unknown])',
  ]);
  const cutInApp = sample(['7f0000001000 work+0x10 (/srv/app)']);
  // A stripped libc without its debug file: its start_thread is unnamed, the chain is whole all the same.
  const strippedLibc = sample([
    '7f0000001000 work+0x10 (/srv/app)',
    '7f0000002000 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  ]);
  // A stripped executable's _start, unnamed, under __libc_start_main: whole too.
  const strippedStart = sample([
    '7f0000001000 work+0x10 (/srv/app)',
    '7f0000002000 __libc_start_main+0x80 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
    '5600000001a0 [unknown] (/srv/app)',
  ]);
  // A lone unnamed libc frame (a hot _int_malloc cut off from its callers): broken.
  const loneLibc = sample(['7f0000002100 [unknown] (/usr/lib/x86_64-linux-gnu/libc.so.6)']);
  const { quality } = foldText(
    whole + kernelOnly + cutInLibc + cutInLibc + cutInApp + strippedLibc + strippedStart + loneLibc,
  );
  assert.equal(quality.samples, 8);
  assert.equal(quality.brokenChains, 4);
  assert.deepEqual(quality.brokenChainsByFile, { 'libc.so.6': 3, app: 1 });
});

test('files named as the target likes (__proto__, toString) are counted as any other', () => {
  const sample = (file: string) =>
    ['app 10/11 [000] 1.000000: 1 cpu-clock:', `\t7f0000001000 [unknown] (/srv/${file})`, '', ''].join('\n');
  const { quality } = foldText(['__proto__', 'toString', 'constructor', 'toString'].map(sample).join(''));
  assert.equal(quality.brokenChains, 4);
  assert.equal(JSON.stringify(quality.brokenChainsByFile), '{"__proto__":1,"constructor":1,"toString":2}');
  assert.equal(JSON.stringify(quality.unnamedLibraries), '{"__proto__":1,"constructor":1,"toString":2}');
});

test('keepAddresses: unnamed native frames are told apart by address beside the same folded stacks', () => {
  const sample = (leaf: string, caller: string) =>
    [
      'app 7/7 [000] 1.000000:   10101010 cpu-clock: ',
      `\t    ${leaf} [unknown] (/usr/lib/libhot.so)`,
      `\t    ${caller} [unknown] (/usr/lib/libhot.so)`,
      '\t    7f0000004000 main+0x10 (/usr/bin/app)',
      '',
      '',
    ].join('\n');
  const text = sample('1119', '114e') + sample('1120', '114e') + sample('1119', '114e');
  const plain = foldText(text);
  const kept = foldText(text, { keepAddresses: true });
  assert.deepEqual([...kept.stacks], [...plain.stacks]);
  assert.deepEqual([...kept.stacks], [['app;main;[libhot.so];[libhot.so]', 3]]);
  assert.deepEqual(plain.addressed, []);
  assert.deepEqual(kept.addressed, [
    { stack: 'app;main;[libhot.so];[libhot.so]', addresses: [undefined, undefined, '114e', '1119'], weight: 2 },
    { stack: 'app;main;[libhot.so];[libhot.so]', addresses: [undefined, undefined, '114e', '1120'], weight: 1 },
  ]);
  assert.deepEqual(kept.quality, plain.quality);
});

test('keepAddresses: past maxAddressedFrames distinct addresses, frames fold by name alone', () => {
  const n = maxAddressedFrames + 10;
  let text = '';
  for (let i = 0; i < n; i++)
    text += `app 7/7 [000] 1.000000:   1 cpu-clock: \n\t    ${(0x1000 + i).toString(16)} [unknown] (/usr/lib/libhot.so)\n\n`;
  const kept = foldText(text, { keepAddresses: true });
  assert.deepEqual([...kept.stacks], [['app;[libhot.so]', n]]);
  assert.equal(kept.addressed.length, maxAddressedFrames);
  assert.equal(
    kept.addressed.reduce((sum, part) => sum + part.weight, 0),
    maxAddressedFrames,
  );
});

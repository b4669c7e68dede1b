import assert from 'node:assert/strict';
import { test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { encodePprof, kernelMapping, managedMapping, renderPprof, threadLabel } from '../../src/render/pprof.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { decodePprof, pprofToFolded, stringAt } from '../support/pprof.js';
import { readFixture } from './golden.js';

const dotnet = () => parseFoldedText(readFixture('dotnet.folded')).stacks;

test('a decoder we did not write reads the profile back into the same folded stacks', () => {
  const stacks = dotnet();
  const profile = decodePprof(renderPprof(stacks));
  assert.deepEqual(pprofToFolded(profile), stacks);
  assert.equal(profile.sample.length, stacks.size);
  assert.deepEqual(
    profile.sampleType.map((t) => [stringAt(profile, t.type), stringAt(profile, t.unit)]),
    [['samples', 'count']],
  );
  assert.equal(stringAt(profile, 0), '');
});

test('CPU sample types, the period and labels are written as given', () => {
  const stacks = new Map([
    ['app;main;work', 3],
    ['app;main', 1],
  ]);
  const nsPerSample = 1e9 / 99;
  const profile = decodePprof(
    renderPprof(stacks, {
      sampleTypes: [
        { type: 'samples', unit: 'count', perWeight: 1 },
        { type: 'cpu', unit: 'nanoseconds', perWeight: nsPerSample },
      ],
      period: { type: 'cpu', unit: 'nanoseconds', value: Math.round(nsPerSample) },
      labels: [
        { key: 'pid', num: 4242 },
        { key: 'container_id', str: 'abc123' },
      ],
      timeNanos: 1_700_000_000_123_456_789n,
      durationNanos: 10_000_000_000,
      comments: ['profcpu test'],
    }),
  );
  assert.deepEqual(pprofToFolded(profile, 0), stacks);
  const cpu = pprofToFolded(profile, 1);
  assert.equal(cpu.get('app;main;work'), Math.round(3 * nsPerSample));
  assert.equal(stringAt(profile, profile.periodType!.type), 'cpu');
  assert.equal(Number(profile.period), Math.round(nsPerSample));
  assert.equal(Number(profile.durationNanos), 10_000_000_000);
  assert.equal(BigInt(profile.timeNanos), 1_700_000_000_123_456_789n);
  assert.deepEqual(
    profile.comment.map((c) => stringAt(profile, c)),
    ['profcpu test'],
  );
  for (const sample of profile.sample) {
    const labels = Object.fromEntries(
      sample.label.map((l) => [stringAt(profile, l.key), Number(l.num) || stringAt(profile, l.str)]),
    );
    assert.deepEqual(labels, { [threadLabel]: 'app', pid: 4242, container_id: 'abc123' });
  }
});

test('each frame is a function named as the flame graph shows it, in a mapping saying its kind', () => {
  const stacks = new Map([
    ['web;start_thread;[libcoreclr.so];Kestrel::Run_[j];Json::Write_[j];Math::Sqrt_[i];memmove;do_syscall_64_[k]', 5],
  ]);
  const profile = decodePprof(
    renderPprof(stacks, {
      frameFiles: new Map([
        ['start_thread', 'libc.so.6'],
        ['memmove', 'libc.so.6'],
      ]),
      binaries: [
        { path: '/usr/lib/x86_64-linux-gnu/libc.so.6', buildId: '93ac61ec' },
        { path: '/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.0/libcoreclr.so', buildId: 'c0ffee' },
      ],
    }),
  );
  assert.deepEqual(pprofToFolded(profile), stacks);
  const mappings = new Map(
    profile.mapping.map((m) => [Number(m.id), [stringAt(profile, m.filename), stringAt(profile, m.buildId)]]),
  );
  const functions = new Map(profile.function.map((f) => [Number(f.id), stringAt(profile, f.name)]));
  const byName = new Map(
    profile.location.map((l) => [
      l.line.map((line) => functions.get(Number(line.functionId))).join('|'),
      mappings.get(Number(l.mappingId)),
    ]),
  );
  assert.deepEqual(Object.fromEntries(byName), {
    start_thread: ['/usr/lib/x86_64-linux-gnu/libc.so.6', '93ac61ec'],
    '[libcoreclr.so]': ['/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.0/libcoreclr.so', 'c0ffee'],
    'Kestrel::Run': [managedMapping, ''],
    // Inlined into its caller: one location, innermost line first.
    'Math::Sqrt|Json::Write': [managedMapping, ''],
    memmove: ['/usr/lib/x86_64-linux-gnu/libc.so.6', '93ac61ec'],
    do_syscall_64: [kernelMapping, ''],
  });
});

test('hostile frame and thread names pass through as data, byte for byte', () => {
  const stacks = new Map([
    ['<script>alert(1)</script>;\u202egnp.exe;a\u0000b\u001b[31m;\ud83d\ude00 emoji_[j]', 2],
    ['t\r\nx;[unknown]', 1],
  ]);
  assert.deepEqual(pprofToFolded(decodePprof(renderPprof(stacks))), stacks);
});

test('the same stacks give the same bytes, in any insertion order', () => {
  const stacks = dotnet();
  const reversed = new Map([...stacks].reverse());
  assert.deepEqual(renderPprof(reversed), renderPprof(stacks));
  assert.ok(gunzipSync(renderPprof(stacks)).equals(Buffer.from(encodePprof(stacks))));
});

test('stacks with no positive weight are left out; a lone frame is its own thread and frame', () => {
  const stacks = new Map([
    ['a;b', 0],
    ['only', 4],
  ]);
  const profile = decodePprof(renderPprof(stacks));
  assert.equal(profile.sample.length, 1);
  assert.deepEqual(pprofToFolded(profile), new Map([['only', 4]]));
});

test('unnamed native frames keep their addresses, placed in their mapping for a backend to name', () => {
  const stack = 'app;main;hot_run;[libhot.so];[libhot.so];do_syscall_64_[k]';
  const other = 'app;main;hot_run;[libhot.so]';
  const stacks = new Map([
    [stack, 5],
    [other, 2],
  ]);
  const range = { start: 0x7f0000001000n, limit: 0x7f0000002000n, offset: 0x1000n };
  const options = {
    frameFiles: new Map([
      ['[libhot.so]', 'libhot.so'],
      ['hot_run', 'libhot.so'],
      ['main', 'app'],
    ]),
    binaries: [
      { path: '/srv/app', buildId: 'aa11' },
      { path: '/usr/lib/libhot.so', buildId: 'bb22', range },
    ],
    // Three of the five samples of `stack` at these addresses (perf 6.1's file offsets), two at others not placed.
    addressed: [
      { stack, addresses: [undefined, undefined, undefined, '114e', '1119', undefined], weight: 2 },
      { stack, addresses: [undefined, undefined, undefined, '114e', '1120', undefined], weight: 1 },
      { stack: other, addresses: [undefined, undefined, undefined, '1119'], weight: 2 },
    ],
    locate: (file: string, ip: string) =>
      file === 'libhot.so' && ip !== 'ffff'
        ? { path: '/usr/lib/libhot.so', range, address: BigInt(`0x${ip}`) - range.offset + range.start }
        : undefined,
  };
  const profile = decodePprof(renderPprof(stacks, options));
  // Read back as folded stacks, the addresses change nothing.
  assert.deepEqual(pprofToFolded(profile), stacks);
  assert.equal(profile.sample.length, 4);
  const hot = profile.mapping.find((m) => stringAt(profile, m.filename) === '/usr/lib/libhot.so')!;
  assert.deepEqual(
    [hot.memoryStart, hot.memoryLimit, hot.fileOffset].map(Number),
    [0x7f0000001000, 0x7f0000002000, 0x1000],
  );
  assert.equal(stringAt(profile, hot.buildId), 'bb22');
  // A backend may name what is in it; the program's own mapping, every frame named, says it needs nothing.
  assert.equal(hot.hasFunctions, false);
  assert.equal(profile.mapping.find((m) => stringAt(profile, m.filename) === '/srv/app')!.hasFunctions, true);
  const placed = profile.location
    .filter((l) => Number(l.address) !== 0)
    .map((l) => [Number(l.address).toString(16), Number(l.mappingId) === Number(hot.id)]);
  // The leaf under the kernel's frame where it was; the caller's return address less one, inside its call; the leaf
  // of `other` where it was too.
  assert.deepEqual(placed.sort(), [
    ['7f0000001119', true],
    ['7f0000001120', true],
    ['7f000000114d', true],
  ]);
  // The same bytes in any order of the addressed parts.
  assert.deepEqual(
    renderPprof(stacks, { ...options, addressed: [...options.addressed].reverse() }),
    renderPprof(stacks, options),
  );
});

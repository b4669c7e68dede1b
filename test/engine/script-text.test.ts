// The built-in engine's perf-script text writer keeps each distinct frame line made (per mapping and address, and for
// the kernel) to give it again: those caches are bounded all together, not each, so a recording mapping many files
// cannot grow them past the bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { context, sampleBit } from '../../src/engine/perf-data/format.js';
import type { PerfDataHeader } from '../../src/engine/perf-data/reader.js';
import type { MmapEvent, SampleEvent } from '../../src/engine/perf-data/records.js';
import { ScriptTextWriter, type ScriptFrame } from '../../src/engine/script-text.js';

const header = {
  mode: 'file',
  attrs: [{ name: 'cpu-clock', type: 1, config: 0n, sampleType: sampleBit.ip | sampleBit.tid | sampleBit.callchain }],
  features: { buildIds: [] },
} as unknown as PerfDataHeader;

function mmap(filename: string, start: bigint): MmapEvent {
  const at = { offset: 0, pid: 7, tid: 7, pgoff: 0n, buildId: undefined, prot: undefined, cpumode: 2, time: undefined };
  return { kind: 'mmap', ...at, start, length: 0x10000n, filename };
}

function sample(ip: bigint): SampleEvent {
  const at = { offset: 0, attr: 0, pid: 7, tid: 7, time: undefined, cpu: undefined, period: 1n };
  return { kind: 'sample', ...at, cpumode: 2, ip, callchain: BigUint64Array.of(context.user, ip) };
}

test('frame lines cached over many mappings are bounded together: past the bound, lines are made again', async () => {
  const firstFrames: ScriptFrame[] = [];
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: (_mapping, offset) => ({ name: `f${offset}`, offset: 0n }) },
    { header: () => {}, sample: (_header, frames) => void firstFrames.push(frames[0]!), oneLine: () => {} },
    { maxCachedLines: 4 },
  );
  await writer.header(header);
  const files = ['/lib/a.so', '/lib/b.so', '/lib/c.so'];
  for (const [i, file] of files.entries()) await writer.event(mmap(file, 0x10000n * BigInt(i + 1)));
  // Two addresses in each of three files: six lines, no mapping holding more than two.
  for (const [i] of files.entries())
    for (const offset of [0x10n, 0x20n]) await writer.event(sample(0x10000n * BigInt(i + 1) + offset));
  await writer.event(sample(0x10010n));
  await writer.event(sample(0x30020n));
  assert.match(firstFrames[0]!.line, /f16\+0x0 \(\/lib\/a\.so\)$/);
  // The first line was dropped when the fifth was cached; the last is still cached.
  assert.equal(firstFrames[6]!.line, firstFrames[0]!.line);
  assert.notEqual(firstFrames[6], firstFrames[0]);
  assert.equal(firstFrames[7], firstFrames[5]);
});

test('a frame given again is looked up again once its process maps a file over it, and stays its own per process', async () => {
  const made: string[][] = [];
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: (_mapping, offset) => ({ name: `f${offset}`, offset: 0n }) },
    {
      header: () => {},
      sample: (_header, frames, count) => void made.push(frames.slice(0, count).map((f) => f.line)),
      oneLine: () => {},
    },
  );
  await writer.header(header);
  const chain = BigUint64Array.of(context.user, 0x10010n, 0x20020n);
  const withChain = (pid: number): SampleEvent => ({ ...sample(0n), pid, tid: pid, callchain: chain });
  await writer.event(withChain(7));
  await writer.event(withChain(7));
  await writer.event(mmap('/lib/a.so', 0x10000n));
  await writer.event(withChain(7));
  await writer.event({ kind: 'fork', offset: 0, pid: 8, ppid: 7, tid: 8, ptid: 7, exec: false, time: undefined });
  await writer.event({ ...mmap('/lib/b.so', 0x20000n), pid: 8, tid: 8 });
  await writer.event(withChain(8));
  await writer.event(withChain(7));
  const unknown = (address: string) => `\t${address.padStart(16)} [unknown] ([unknown])`;
  const a = `\t${'10'.padStart(16)} f16+0x0 (/lib/a.so)`;
  const b = `\t${'20'.padStart(16)} f32+0x0 (/lib/b.so)`;
  assert.deepEqual(made, [
    [unknown('10010'), unknown('20020')],
    [unknown('10010'), unknown('20020')],
    [a, unknown('20020')],
    [a, b],
    [a, unknown('20020')],
  ]);
});

test('kernel mapping records give the symbols the reference perf places the kernel by, as perf reads them', async () => {
  const given: ({ name: string; address: bigint } | undefined)[] = [];
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: () => undefined, kernelReference: (reference) => void given.push(reference) },
    { header: () => {}, sample: () => {}, oneLine: () => {} },
  );
  await writer.header(header);
  const kernelMap = (filename: string, pgoff: bigint, cpumode = 1): MmapEvent => ({
    ...mmap(filename, 0xffffffff81000000n),
    pid: -1,
    tid: 0,
    pgoff,
    cpumode,
  });
  await writer.event(kernelMap('[kernel.kallsyms]_text', 0xffffffff81000000n));
  // Addresses hidden at recording (pgoff 0): the map is made anew without a reference.
  await writer.event(kernelMap('[kernel.kallsyms]_text', 0n));
  // perf compares the first 16 characters only, and ends the name at a `]`.
  await writer.event(kernelMap('[kernel.kallsymsX_stext]rest', 0x1000n));
  // Not the kernel's: a module's record, a user-mode one, another name.
  await writer.event(kernelMap('[profmod]', 0x2000n));
  await writer.event(kernelMap('/lib/modules/profmod.ko', 0x2000n));
  await writer.event(kernelMap('[kernel.kallsyms]_text', 0x3000n, 2));
  await writer.event(kernelMap('[kernel.kallsym', 0x3000n));
  // perf keeps 255 bytes of the record's name.
  await writer.event(kernelMap(`[kernel.kallsyms]${'x'.repeat(300)}`, 0x4000n));
  assert.deepEqual(given, [
    { name: '_text', address: 0xffffffff81000000n },
    undefined,
    { name: '_stext', address: 0x1000n },
    { name: 'x'.repeat(255 - 17), address: 0x4000n },
  ]);
});

// DWARF recordings (`perf record --call-graph dwarf`, `collect --unwind mixed`) read by the built-in engine, which
// unwinds each sample's stack copy itself (src/engine/unwind/): on native code it must print what perf script prints
// for every sample both unwind to the thread's start, and say that it unwound them; on .NET code it goes on through
// JIT frames by frame pointer where perf stops, and says how many samples it took so.
import assert from 'node:assert/strict';
import { cp, readFile } from 'node:fs/promises';
import { execa } from 'execa';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { postprocess, type Engine } from '../../src/postprocess/postprocess.js';
import { builtinShortfall } from '../../src/engine/engine-choice.js';
import type { PerfDataOutline } from '../../src/engine/perf-data/reader.js';
import { regsAbi, sampleBit } from '../../src/engine/perf-data/format.js';
import type { PerfDataHeader } from '../../src/engine/perf-data/reader.js';
import type { SampleEvent } from '../../src/engine/perf-data/records.js';
import { ScriptTextWriter } from '../../src/engine/script-text.js';
import { unwindSample } from '../../src/engine/unwind/sample-unwind.js';
import type { UnwindRow } from '../../src/formats/elf/eh-frame.js';
import { readElf, bytesSource } from '../../src/formats/elf/elf.js';
import { buildCfiStack, recordDwarf } from '../fixtures/cfi-stack/build.js';
import { runCli } from '../support/cli.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { canRecord, need, needCommand, needDotnet } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

interface Run {
  /** perf_script.out's samples, each its lines (header line first). */
  samples: string[][];
  stacks: Map<string, number>;
  warnings: string[];
  /** Lines of progress (the unwinding's notice is one). */
  notes: string[];
  manifest: Awaited<ReturnType<typeof postprocess>>['manifest'];
}

/** `dir` post-processed by `engine` in a copy of it. */
async function run(t: TestContext, dir: string, engine: Engine): Promise<Run> {
  const copy = await tempDir(t, `dwarf-${engine}`);
  await cp(dir, copy, { recursive: true });
  const warnings: string[] = [];
  const notes: string[] = [];
  const { manifest } = await postprocess(
    copy,
    { engine, tarball: false },
    { warn: (w) => warnings.push(w), progress: (m) => notes.push(m) },
  );
  const text = await readFile(join(copy, layout.perfScript), 'utf8');
  const samples = text
    .split('\n\n')
    .map((block) => block.split('\n').filter((line) => line !== '' && !line.startsWith('#')))
    .filter((lines) => lines.length > 0);
  const stacks = new Map<string, number>();
  for (const line of (await readFile(join(copy, layout.foldedStacks), 'utf8')).split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (m) stacks.set(m[1]!, Number(m[2]));
  }
  return { samples, stacks, warnings, notes, manifest };
}

/** A sample's last frame is a thread's start: its stack was unwound whole. */
const whole = (lines: string[]) => /\s(_start|clone3|__clone3|start_thread)\+0x[0-9a-f]+ \(/.test(lines.at(-1) ?? '');

for (const framePointers of [false, true])
  test(`a DWARF recording of code built ${framePointers ? 'with' : 'without'} frame pointers: perf script’s frames on every sample both unwind whole`, async (t) => {
    if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
    const dir = await tempDir(t, 'dwarf-engine');
    const { program } = buildCfiStack(dir, { framePointers });
    recordDwarf(program, join(dir, layout.perfData), { stackBytes: 8192, frequency: 999, seconds: 2 });

    const perf = await run(t, dir, 'perf');
    const native = await run(t, dir, 'native');
    assert.equal(native.manifest.postprocess.engine, 'native');
    assert.equal(native.samples.length, perf.samples.length);
    let both = 0;
    let onlyNative = 0;
    const onlyPerf: number[] = [];
    const differing: string[] = [];
    native.samples.forEach((ours, i) => {
      const theirs = perf.samples[i]!;
      assert.equal(ours[0], theirs[0], `sample ${i}'s header line`);
      if (whole(ours) && whole(theirs)) {
        both++;
        if (ours.join('\n') !== theirs.join('\n') && differing.length < 3)
          differing.push(`#${i}\n ours\n${ours.join('\n')}\n perf\n${theirs.join('\n')}`);
      } else if (whole(ours)) onlyNative++;
      else if (whole(theirs)) onlyPerf.push(i);
    });
    t.diagnostic(`${native.samples.length} samples: ${both} whole in both engines, ${onlyNative} in the built-in only`);
    assert.deepEqual(differing, []);
    assert.deepEqual(onlyPerf, [], 'samples perf unwinds whole and the built-in engine does not');
    assert.ok(both > native.samples.length * 0.9, `${both} of ${native.samples.length} samples whole in both`);

    // Said, and counted in the manifest; no JIT code here, so no frame-pointer step.
    const unwound = native.manifest.postprocess.unwound;
    assert.ok(unwound && unwound.samples === native.samples.length, JSON.stringify(unwound));
    assert.equal(unwound.framePointerSamples, 0);
    assert.ok((unwound.stops['end'] ?? 0) >= both);
    assert.ok(
      native.notes.some((m) => /^unwound the stack copies of \d+ samples: \d+\.\d% to their thread's start/.test(m)),
      native.notes.join('\n'),
    );
    assert.equal(native.manifest.naming.brokenChains, native.samples.length - (unwound.stops['end'] ?? 0));
  });

test('a DWARF recording of another machine than x86-64 goes to perf script, saying why', () => {
  const outline = (arch: string | undefined) =>
    ({
      header: {
        mode: 'file',
        attrs: [{ sampleType: sampleBit.callchain | sampleBit.regsUser | sampleBit.stackUser, branchSampleType: 0n }],
        features: { buildIds: [], ...(arch && { arch }) },
      },
    }) as unknown as PerfDataOutline;
  assert.equal(builtinShortfall(outline('x86_64')), undefined);
  assert.match(builtinShortfall(outline('aarch64'))?.why ?? '', /DWARF call graphs .* of an aarch64 machine/);
  // No HEADER_ARCH (perf killed before writing it): this machine's, as perf takes it.
  if (process.arch === 'x64') assert.equal(builtinShortfall(outline(undefined)), undefined);
  else assert.match(builtinShortfall(outline(undefined))?.why ?? '', /a machine it does not name, taken for this one/);
});

test('collect on a .NET app, unwinding by default: mixed, whole stacks through JIT code, its CFI kept, and said', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'dwarf-engine');
  const app = await startDotnetApp({ seconds: 60 });
  t.after(() => app.kill());
  const out = join(work, 'out');
  const collect = await runCli(
    ['collect', '--pid', String(app.pid), '--duration', '3', '--symbols', 'none', '--output', out],
    { cwd: work },
  );
  if (!need(t, collect.exitCode === 0, `a working collect (${String(collect.all).slice(-300)})`)) return;
  await app.kill();
  // --unwind auto: 3 s of 32 KiB copies on this machine's CPUs fit the budget, and perf compresses them.
  assert.match(String(collect.all), /unwinding mixed \(CFI and frame pointers, from stack copies\): 3 s × 99 Hz/);
  assert.match(String(collect.all), /a 32768-byte stack copy a sample for mixed unwinding/);
  const manifest = JSON.parse(await readFile(join(out, layout.manifest), 'utf8'));
  const compresses = (await execa('perf', ['version', '--build-options'])).stdout.match(/zstd: \[ on/) !== null;
  const { unwind, stackBytes, compressed } = manifest.collect.options;
  assert.deepEqual({ unwind, stackBytes, compressed }, { unwind: 'mixed', stackBytes: 32768, compressed: compresses });
  assert.match(manifest.collect.options.unwindChosenBecause, /within the 512 MiB allowed/);
  const command: string[] = manifest.collect.record.command;
  assert.ok(command.includes('dwarf,32768') && command.includes('-z') === compresses, command.join(' '));
  const unwound = manifest.postprocess.unwound;
  t.diagnostic(
    `unwound ${JSON.stringify(unwound)}; broken chains ${JSON.stringify(manifest.naming.brokenChainsByFile)}`,
  );
  assert.ok(unwound.framePointerSamples > unwound.samples * 0.9, JSON.stringify(unwound));
  assert.ok(manifest.naming.brokenChains <= manifest.naming.samples * 0.01, JSON.stringify(manifest.naming));

  // libcoreclr.so kept with its call frame information, so that the folder unwinds the same anywhere.
  const kept = JSON.parse(await readFile(join(out, layout.binariesIndex), 'utf8')).binaries as {
    path: string;
    buildId: string;
  }[];
  const coreclr = kept.find((b) => b.path.endsWith('/libcoreclr.so'));
  assert.ok(coreclr, kept.map((b) => b.path).join(' '));
  const bytes = await readFile(join(out, layout.binaries, coreclr.buildId));
  const elf = await readElf(bytesSource(bytes), 'libcoreclr.so');
  const [from, to] = elf.unwindRanges[0]!;
  assert.ok(
    bytes.subarray(from, to).some((b) => b !== 0),
    'the kept copy holds .eh_frame',
  );

  // perf's own unwinding stops at the first JIT frame: the built-in engine's stacks are deeper, and the folder
  // post-processes the same elsewhere (here: with the kept binaries only, no file of this machine's).
  const perf = await run(t, out, 'perf');
  const native = await run(t, out, 'native');
  const depth = (r: Run) =>
    [...r.stacks].reduce((sum, [stack, n]) => sum + stack.split(';').length * n, 0) /
    [...r.stacks.values()].reduce((sum, n) => sum + n, 0);
  t.diagnostic(`mean depth: built-in ${depth(native).toFixed(1)}, perf ${depth(perf).toFixed(1)}`);
  assert.ok(depth(native) > depth(perf) + 3);
  assert.ok(native.notes.some((m) => /by its frame pointers, where perf’s own DWARF unwinding stops/.test(m)));
});

/** A recording of one cpu-clock event with DWARF call graphs, of an x86-64 machine. */
const dwarfHeader = {
  mode: 'file',
  attrs: [
    {
      name: 'cpu-clock',
      type: 1,
      config: 0n,
      sampleType: sampleBit.ip | sampleBit.tid | sampleBit.callchain | sampleBit.regsUser | sampleBit.stackUser,
    },
  ],
  features: { buildIds: [], arch: 'x86_64' },
} as unknown as PerfDataHeader;
/** JIT-like anonymous memory, and the sampled stack pointer. */
const jit = 0x7000_0000_0000n;
const sp = 0x7ffd_0000_0000n;

/**
 * A stack copy of `words` words of frame-pointer links from `sp`: frame i at sp + 16 i, its saved rbp the next
 * frame's, its return address in the JIT memory.
 */
function frameLinks(words: number): Uint8Array {
  const stack = new BigUint64Array(words);
  for (let i = 0; i + 1 < stack.length; i += 2) {
    stack[i] = sp + BigInt((i + 2) * 8);
    stack[i + 1] = jit + 0x100n + BigInt(i);
  }
  return new Uint8Array(stack.buffer);
}

// The target writes its stack and ships its CFI: forged ones cost a bounded walk per sample. Here every sample's
// stack copy is 64 KiB of frame-pointer links that each go up 16 bytes into JIT-like memory, a CFI row that would
// walk down the stack, and regs that put rbp anywhere: 3000 samples, each stopped at 127
// frames or at once, in bounded time, each walk's reads within its copy.
test('forged stacks and CFI: each DWARF sample is walked within its copy and 127 frames, quickly', async () => {
  const lib = 0x7100_0000_0000n;
  // A row whose CFA is below rsp (rsp - 16), its return address read at CFA + 24: the walk would go down the stack.
  const selfRow: UnwindRow = {
    start: 0,
    end: 0x10000,
    cfa: { type: 'register', register: 7, offset: -16 },
    registers: new Map([[16, { type: 'offset', offset: 24 }]]),
    returnAddressRegister: 16,
    signalFrame: false,
  };
  let rowsAsked = 0;
  let framesGiven = 0;
  let samples = 0;
  const writer = new ScriptTextWriter(
    {
      kernel: () => undefined,
      file: () => undefined,
      unwindRows: (mapping) => {
        rowsAsked++;
        return mapping.path === '/lib/forged.so' ? { rowAt: () => selfRow, dotnet: () => false } : undefined;
      },
    },
    {
      header: () => {},
      sample: (_header, _frames, count) => {
        samples++;
        framesGiven = Math.max(framesGiven, count);
      },
      oneLine: () => {},
    },
  );
  await writer.header(dwarfHeader);
  const at = { offset: 0, pid: 7, tid: 7, buildId: undefined, prot: undefined, cpumode: 2, time: undefined };
  await writer.event({ kind: 'mmap', ...at, start: jit, length: 0x100000n, pgoff: 0n, filename: '//anon' });
  await writer.event({ kind: 'mmap', ...at, start: lib, length: 0x10000n, pgoff: 0n, filename: '/lib/forged.so' });
  const bytes = frameLinks(8192);
  const started = performance.now();
  for (let i = 0; i < 3000; i++) {
    // bp, sp, ip (perf's x86 registers 6, 7, 8): into the JIT memory (frame pointers) or the forged file (CFI).
    const ip = i % 2 === 0 ? jit + BigInt(i) : lib + BigInt(i % 0x1000);
    const bp = i % 3 === 0 ? sp : BigInt.asUintN(64, BigInt(i) * 0x9e3779b97f4a7c15n);
    await writer.event({
      kind: 'sample',
      offset: 0,
      attr: 0,
      pid: 7,
      tid: 7,
      time: undefined,
      cpu: undefined,
      period: 1n,
      cpumode: 2,
      ip,
      callchain: BigUint64Array.of(),
      userRegs: { abi: regsAbi.abi64, mask: 0b111000000n, values: BigUint64Array.of(bp, sp, ip) },
      userStack: bytes,
    } as SampleEvent);
  }
  const ms = performance.now() - started;
  assert.equal(samples, 3000);
  assert.ok(framesGiven <= 127, `${framesGiven} frames`);
  assert.equal(writer.unwound.samples, 3000);
  assert.ok((writer.unwound.stops['max-frames'] ?? 0) > 0, JSON.stringify(writer.unwound.stops));
  assert.ok((writer.unwound.stops['cfa-not-up'] ?? 0) > 0, JSON.stringify(writer.unwound.stops));
  assert.ok(rowsAsked > 0);
  // Far above what it takes (about 0.1 ms a sample): a walk without its bounds would not end at all.
  assert.ok(ms < 60_000, `${ms} ms`);
});

// A rows source whose files never load (each ask a promise that rejects, or settles with nothing there after): the
// walk runs once per ask at most 128 times, then walks with what there is, and the sample is given.
test('a file whose call frame information never loads ends the walk, it does not run it for ever', async () => {
  const regs = { abi: regsAbi.abi64, mask: 0b111000000n, values: BigUint64Array.of(0x7010n, 0x7000n, 0x1000n) };
  const stack = new Uint8Array(new BigUint64Array([0x2001n, 0n, 0n, 0n]).buffer);
  for (const settle of [() => Promise.reject(new Error('no file')), () => Promise.resolve(undefined)]) {
    let asked = 0;
    const result = await unwindSample(regs, stack, {
      rowAt: () => {
        asked++;
        return settle();
      },
      framePointers: () => false as const,
    });
    assert.deepEqual({ frames: result.frames, stop: result.stop }, { frames: [0x1000n], stop: 'no-cfi' });
    assert.ok(asked <= 128, `${asked} asks`);
  }
});

// perf caps a DWARF sample's kernel frames and its unwound user frames at max-stack each, not together: a deep
// kernel stack under a deep user stack keeps both (thread__resolve_callchain_sample, then _unwind).
test('a DWARF sample keeps 127 kernel frames and 127 user frames, each capped alone', async () => {
  const counts: number[] = [];
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: () => undefined, unwindRows: () => undefined },
    { header: () => {}, sample: (_header, _frames, count) => void counts.push(count), oneLine: () => {} },
  );
  await writer.header(dwarfHeader);
  const at = { offset: 0, pid: 7, tid: 7, buildId: undefined, prot: undefined, cpumode: 2, time: undefined };
  await writer.event({ kind: 'mmap', ...at, start: jit, length: 0x100000n, pgoff: 0n, filename: '//anon' });
  const kernel = Array.from({ length: 200 }, (_, i) => 0xffffffff81000000n + BigInt(i * 16));
  const sample = (kernelFrames: number) =>
    ({
      kind: 'sample',
      offset: 0,
      attr: 0,
      pid: 7,
      tid: 7,
      time: undefined,
      cpu: undefined,
      period: 1n,
      cpumode: 1,
      ip: kernel[0]!,
      callchain: BigUint64Array.of(0xffffffffffffff80n, ...kernel.slice(0, kernelFrames)),
      userRegs: { abi: regsAbi.abi64, mask: 0b111000000n, values: BigUint64Array.of(sp, sp, jit + 0x10n) },
      userStack: frameLinks(1024),
    }) as SampleEvent;
  await writer.event(sample(100));
  await writer.event(sample(200));
  await writer.event({ ...sample(3), userStack: new Uint8Array(0) });
  // 100 kernel frames and 127 user ones; 127 and 127; 3 and none (no stack copy: perf unwinds nothing).
  assert.deepEqual(counts, [227, 254, 3]);
});

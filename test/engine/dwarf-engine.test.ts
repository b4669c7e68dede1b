// DWARF recordings (`perf record --call-graph dwarf`, `collect --unwind mixed`) read by the built-in engine, which
// unwinds each sample's stack copy itself (src/engine/unwind/): on native code it must print what perf script prints
// for every sample both unwind to the thread's start, and say that it unwound them; on .NET code it goes on through
// JIT frames by frame pointer where perf stops, and says how many samples it took so.
import assert from 'node:assert/strict';
import { cp, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { postprocess, type Engine } from '../../src/postprocess/postprocess.js';
import { builtinShortfall } from '../../src/engine/engine-choice.js';
import type { PerfDataOutline } from '../../src/engine/perf-data/reader.js';
import { sampleBit } from '../../src/engine/perf-data/format.js';
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
  manifest: Awaited<ReturnType<typeof postprocess>>['manifest'];
}

/** `dir` post-processed by `engine` in a copy of it. */
async function run(t: TestContext, dir: string, engine: Engine): Promise<Run> {
  const copy = await tempDir(t, `dwarf-${engine}`);
  await cp(dir, copy, { recursive: true });
  const warnings: string[] = [];
  const { manifest } = await postprocess(copy, { engine, tarball: false }, { warn: (w) => warnings.push(w) });
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
  return { samples, stacks, warnings, manifest };
}

/** A sample's last frame is a thread's start: its stack was unwound whole. */
const whole = (lines: string[]) => /\s(_start|clone3|__clone3|start_thread)\+0x[0-9a-f]+ \(/.test(lines.at(-1) ?? '');

test('a DWARF recording of code built without frame pointers: perf script’s frames on every sample both unwind whole', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const dir = await tempDir(t, 'dwarf-engine');
  const { program } = buildCfiStack(dir);
  recordDwarf(program, join(dir, layout.perfData), { stackBytes: 8192, frequency: 999, seconds: 2 });

  const perf = await run(t, dir, 'perf');
  const native = await run(t, dir, 'native');
  assert.equal(native.manifest.postprocess.engine, 'native');
  assert.equal(native.samples.length, perf.samples.length);
  let both = 0;
  let onlyNative = 0;
  const differing: string[] = [];
  native.samples.forEach((ours, i) => {
    const theirs = perf.samples[i]!;
    assert.equal(ours[0], theirs[0], `sample ${i}'s header line`);
    if (whole(ours) && whole(theirs)) {
      both++;
      if (ours.join('\n') !== theirs.join('\n') && differing.length < 3)
        differing.push(`#${i}\n ours\n${ours.join('\n')}\n perf\n${theirs.join('\n')}`);
    } else if (whole(ours)) onlyNative++;
  });
  t.diagnostic(`${native.samples.length} samples: ${both} whole in both engines, ${onlyNative} in the built-in only`);
  assert.deepEqual(differing, []);
  assert.ok(both > native.samples.length * 0.9, `${both} of ${native.samples.length} samples whole in both`);

  // Said, and counted in the manifest; no JIT code here, so no frame-pointer step.
  const unwound = native.manifest.postprocess.unwound;
  assert.ok(unwound && unwound.samples === native.samples.length, JSON.stringify(unwound));
  assert.equal(unwound.framePointerSamples, 0);
  assert.ok((unwound.stops['end'] ?? 0) >= both);
  assert.ok(
    native.warnings.some((w) =>
      /DWARF call graphs: the built-in engine unwound the user stacks of \d+ samples/.test(w),
    ),
    native.warnings.join('\n'),
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
  assert.match(builtinShortfall(outline(undefined))?.why ?? '', /of an unnamed machine/);
});

test('collect --unwind mixed on a .NET app: whole stacks through JIT code, its CFI kept, and said', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'dwarf-engine');
  const app = await startDotnetApp({ seconds: 60 });
  t.after(() => app.kill());
  const out = join(work, 'out');
  const collect = await runCli(
    ['collect', '--pid', String(app.pid), '--duration', '3', '--unwind', 'mixed', '--symbols', 'none', '--output', out],
    { cwd: work },
  );
  if (!need(t, collect.exitCode === 0, `a working collect (${String(collect.all).slice(-300)})`)) return;
  await app.kill();
  assert.match(String(collect.all), /a 16384-byte stack copy a sample for mixed unwinding/);
  const manifest = JSON.parse(await readFile(join(out, layout.manifest), 'utf8'));
  assert.deepEqual(
    { unwind: manifest.collect.options.unwind, stackBytes: manifest.collect.options.stackBytes },
    { unwind: 'mixed', stackBytes: 16384 },
  );
  assert.ok(manifest.collect.record.command.includes('dwarf,16384'), manifest.collect.record.command.join(' '));
  const unwound = manifest.postprocess.unwound;
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
  assert.ok(native.warnings.some((w) => /by its frame pointers, where perf’s DWARF unwinding stops/.test(w)));
});

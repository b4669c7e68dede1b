// The two engines of postprocess on the same recordings: perf script, and profcpu's own perf.data reader. Each case
// post-processes one folder with both and compares what they write: the folded stacks line for line, and the frames of
// flamescope/perf_script.out (every line but the `#` header, which perf fills with facts of the machine and file that
// profcpu does not repeat) byte for byte.
import assert from 'node:assert/strict';
import { chown, cp, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test, type TestContext } from 'node:test';
import { execa } from 'execa';
import { Decompress } from 'fzstd';
import { layout } from '../../src/output/layout.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import type { StepContext } from '../../src/step/step.js';
import { vdsoStep } from '../../src/kernel/vdso-step.js';
import { postprocess, type Engine } from '../../src/postprocess/postprocess.js';
import { keepBinaries, type KeptBinary } from '../../src/binaries/kept-binaries.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { buildNativeLibIfPossible, needNativeLib } from '../fixtures/native-lib/build.js';
import { runCli } from '../support/cli.js';
import { ownHome } from '../support/home.js';
import { canRecord, need, needCommand, needDotnet } from '../support/requirements.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { burnFunctions, keepPerfMap, recordCommand, recordNode } from '../postprocess/recording.js';
import { tempDir } from '../support/temp.js';

interface EngineOutput {
  stacks: Map<string, number>;
  /** perf_script.out without its `#` header lines. */
  frames: string[];
}

/** What `engine` writes for `dir` (post-processed in a copy of the folder, so both start alike). */
async function outputs(t: TestContext, dir: string, engine: Engine): Promise<EngineOutput> {
  const copy = await tempDir(t, `engine-${engine}`);
  await cp(dir, copy, { recursive: true });
  await postprocess(copy, { engine, tarball: false });
  const stacks = new Map<string, number>();
  for (const line of (await readFile(join(copy, layout.foldedStacks), 'utf8')).split('\n')) {
    const m = /^(.*) (\d+)$/.exec(line);
    if (m) stacks.set(m[1]!, Number(m[2]));
  }
  const script = await readFile(join(copy, layout.perfScript), 'utf8');
  return { stacks, frames: script.split('\n').filter((line) => !line.startsWith('#')) };
}

/** Both engines on `dir`: the same folded stacks and the same perf-script frames, line for line, and not nothing. */
async function assertSameFold(t: TestContext, dir: string): Promise<Map<string, number>> {
  const perf = await outputs(t, dir, 'perf');
  const native = await outputs(t, dir, 'native');
  const onlyPerf = [...perf.stacks].filter(([stack, n]) => native.stacks.get(stack) !== n);
  const onlyNative = [...native.stacks].filter(([stack, n]) => perf.stacks.get(stack) !== n);
  assert.deepEqual(onlyNative.slice(0, 3), [], `${onlyNative.length} stacks only the native engine folds`);
  assert.deepEqual(onlyPerf.slice(0, 3), [], `${onlyPerf.length} stacks only perf folds`);
  const differing = perf.frames.findIndex((line, i) => native.frames[i] !== line);
  assert.ok(
    differing < 0 && native.frames.length === perf.frames.length,
    `perf_script.out differs from line ${differing} (not counting the header):\n` +
      `  perf    ${perf.frames[differing]}\n  native  ${native.frames[differing]}`,
  );
  const samples = [...perf.stacks.values()].reduce((sum, n) => sum + n, 0);
  t.diagnostic(`${perf.stacks.size} stacks, ${samples} samples, ${perf.frames.length} lines of perf script text`);
  assert.ok(native.stacks.size > 0);
  return native.stacks;
}

test('a Node program with a perf map (JIT frames, C++ frames perf demangles): the same folded stacks', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  const recording = await recordNode(dir, 1500);
  await keepPerfMap(dir, recording);

  const native = await assertSameFold(t, dir);
  const text = [...native.keys()].join('\n');
  for (const name of burnFunctions) assert.ok(text.includes(name), `native engine lost ${name}`);
});

test('a kernel-heavy native program: the same folded stacks from both engines', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  const load = 'dd if=/dev/zero of=/dev/null bs=4k count=300000; dd if=/dev/urandom of=/dev/null bs=64k count=1500';
  await recordCommand(join(dir, 'perf.data'), ['sh', '-c', load]);
  await assertSameFold(t, dir);
});

test('a recording of another kernel: both engines name its frames from the kallsyms in perf’s build-id cache', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  await recordCommand(join(dir, 'perf.data'), ['sh', '-c', 'dd if=/dev/zero of=/dev/null bs=4k count=300000']);
  // The recording made another kernel's: the running kernel's build-id replaced in perf.data's build-id table, and
  // that kernel's kallsyms (this one's, under the new build-id) in the build-id cache of a HOME of its own. perf then
  // reads the cache's copy, not /proc/kallsyms (dso__find_kallsyms); so must the built-in engine.
  const running = (await execa('perf', ['buildid-list', '-k'])).stdout.trim();
  assert.match(running, /^[0-9a-f]{40}$/);
  const other = 'cd'.repeat(20);
  const data = await readFile(join(dir, 'perf.data'));
  const replaced = Buffer.from(
    data
      .toString('latin1')
      .replaceAll(Buffer.from(running, 'hex').toString('latin1'), Buffer.from(other, 'hex').toString('latin1')),
    'latin1',
  );
  assert.notDeepEqual(replaced, data, 'perf.data holds the running kernel’s build-id');
  await writeFile(join(dir, 'perf.data'), replaced);
  const home = await ownHome(t);
  const entry = join(home, '.debug', '[kernel.kallsyms]', other);
  await mkdir(entry, { recursive: true });
  const kallsyms = await readFile('/proc/kallsyms', 'utf8');
  // The copy as that kernel's boot placed it, then as another boot of it did (KASLR: the kernel's own symbols 32 MiB
  // higher, its modules' where they were): perf moves them back by where perf.data's kernel mapping record says
  // `_text` was (kallsyms__delta), and so must the built-in engine.
  for (const shift of [0n, 0x2000000n]) {
    const moved = kallsyms.replace(/^([0-9a-f]{16})( [^\n\t]*)$/gm, (line, address: string, rest: string) =>
      BigInt(`0x${address}`) === 0n
        ? line
        : `${BigInt.asUintN(64, BigInt(`0x${address}`) + shift)
            .toString(16)
            .padStart(16, '0')}${rest}`,
    );
    if (shift !== 0n) assert.notEqual(moved, kallsyms);
    await writeFile(join(entry, 'kallsyms'), moved);
    const native = await assertSameFold(t, dir);
    const kernelFrames = [...native.keys()].filter((stack) => /;entry_SYSCALL_64/.test(stack));
    assert.ok(kernelFrames.length > 0, `shift ${shift}: ${[...native.keys()].slice(0, 5).join('\n')}`);
  }

  // Without the cache's copy, neither names them.
  await rm(entry, { recursive: true });
  const unnamed = await assertSameFold(t, dir);
  assert.equal([...unnamed.keys()].filter((stack) => /;entry_SYSCALL_64/.test(stack)).length, 0);
});

test('a native program whose stripped library has its debug file beside it: the same folded stacks', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  const lib = needNativeLib(t, buildNativeLibIfPossible(join(dir, 'lib')));
  if (!lib) return;
  const out = join(dir, 'out');
  await execa('mkdir', ['-p', out]);
  await recordCommand(join(out, 'perf.data'), [lib.program, '2']);
  const native = await assertSameFold(t, out);
  const text = [...native.keys()].join('\n');
  // Named from the debug file only (the library is stripped).
  assert.ok(
    lib.hotFunctions.some((name) => text.includes(name)),
    text,
  );
});

test('a .NET app recorded by profcpu collect (kept binaries, perf map, jitdump): the same folded stacks', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'engines');
  const app = await startDotnetApp({ seconds: 60 });
  t.after(() => app.kill());
  const out = join(work, 'out');
  // Frame-pointer chains, which both engines read alike; the stack copies collect records by default go past perf's
  // DWARF unwinding through JIT code, and are compared where perf unwinds whole (dwarf-engine.test.ts).
  const args = ['collect', '--pid', String(app.pid), '--duration', '3', '--unwind', 'fp', '--output', out];
  const run = await runCli(args, { cwd: work });
  if (!need(t, run.exitCode === 0, `a working collect (${String(run.all).slice(-300)})`)) return;
  await app.kill();
  await assertSameFold(t, out);
});

const clockLoop = join(dirname(fileURLToPath(import.meta.url)), '../fixtures/vdso-clock/clockloop.c');

// perf names [vdso] frames from its cache's copy of the recorded vdso when perf.data has its build-id (a plain perf
// record, which fills the cache), else from its own vdso (`-N --buildid-mmap`, as collect records: no build-id for
// the vdso, which is no file). The built-in engine must name them alike.
for (const [how, flags, keepVdso] of [
  ['a plain perf record', [], false],
  ['perf record -N --buildid-mmap, as collect', ['-N', '--buildid-mmap'], false],
  ['perf record -N --buildid-mmap, with the vdso collect keeps', ['-N', '--buildid-mmap'], true],
] as const) {
  test(`a program calling clock_gettime in a loop (${how}): the same vDSO frames from both engines`, async (t) => {
    if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
    const dir = await tempDir(t, 'engines');
    const program = join(dir, 'clockloop');
    // -fno-plt: calls through the GOT, so no sample lands in a PLT entry (covered by a case of its own).
    await execa('gcc', ['-O1', '-fno-omit-frame-pointer', '-fno-plt', '-o', program, clockLoop]);
    await recordCommand(join(dir, 'perf.data'), [program, '1'], flags);
    if (keepVdso) {
      await mkdir(join(dir, 'target'));
      await vdsoStep().afterRecording!({ dir, procRoot: '/proc', signal: new AbortController().signal } as StepContext);
      await stat(join(dir, layout.vdso));
    }
    const native = await assertSameFold(t, dir);
    const vdso = [...native].filter(([stack]) => stack.endsWith(';__vdso_clock_gettime'));
    const samples = [...native.values()].reduce((sum, n) => sum + n, 0);
    assert.ok(vdso.length > 0, [...native.keys()].join('\n'));
    t.diagnostic(`${vdso.reduce((sum, [, n]) => sum + n, 0)} of ${samples} samples end in __vdso_clock_gettime`);
  });
}

// A recording made by hand of a runtime that writes a perf map (here Node with --perf-basic-prof): perf names its JIT
// frames from /tmp/perf-<pid>.map, and so must the built-in engine, from there or from a copy beside perf.data, and
// say which it read.
test('perf record of a Node process, its perf map left in /tmp, then copied beside perf.data: both engines name its JIT frames', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  const recording = await recordNode(dir, 1500);
  const map = `/tmp/perf-${recording.pid}.map`;
  t.after(() => rm(map, { force: true }));

  // Left where perf reads it.
  const native = await assertSameFold(t, dir);
  for (const name of burnFunctions) assert.ok([...native.keys()].join('\n').includes(name), `${name} named`);
  const run = await postprocess(dir, { tarball: false });
  // FlameScope's own frame rule (flamescope/app/perf/regexp.py) finds the JIT functions in the text it is pointed at.
  const flameScopeFrames = (await readFile(join(dir, layout.perfScript), 'utf8'))
    .split('\n')
    .map((line) => /^[\t ]*[0-9a-fA-F]+ (.+) \((.*?)\)$/.exec(line)?.[1])
    .filter((name) => name !== undefined);
  for (const name of burnFunctions)
    assert.ok(
      flameScopeFrames.some((frame) => frame.includes(name)),
      `${name} in FlameScope's frames`,
    );
  assert.deepEqual(
    run.manifest.postprocess.jitMaps?.map(({ file, origin }) => ({ file, origin })),
    [{ file: map, origin: 'machine' }],
  );

  // Owned by somebody else: perf (6.1 and 7.3) reads it all the same, and so does the built-in engine.
  await chown(map, 12345, 12345);
  const owned = await assertSameFold(t, dir);
  assert.ok([...owned.keys()].join('\n').includes(burnFunctions[0]));

  // Copied beside perf.data, as people copy it, and gone from /tmp.
  await cp(map, join(dir, `perf-${recording.pid}.map`));
  await chown(join(dir, `perf-${recording.pid}.map`), 0, 0);
  await rm(map);
  const beside = await assertSameFold(t, dir);
  for (const name of burnFunctions) assert.ok([...beside.keys()].join('\n').includes(name), `${name} named`);
  const again = await postprocess(dir, { tarball: false });
  assert.deepEqual(
    again.manifest.postprocess.jitMaps?.map(({ file, origin }) => ({ file, origin })),
    [{ file: `perf-${recording.pid}.map`, origin: 'folder' }],
  );
});

// DWARF call graphs of this machine (x86-64): the built-in engine unwinds them itself (test/engine/dwarf-engine.test.ts
// compares its stacks with perf's), with or without perf installed, and says so; `--engine perf` still hands them to
// perf script.
test('perf record --call-graph dwarf: read by the built-in engine, even with no perf, and said', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  await execa('perf', [
    'record',
    '--call-graph',
    'dwarf,4096',
    '-F',
    '99',
    '-e',
    'cpu-clock',
    '-o',
    join(dir, 'perf.data'),
    '--',
    'sh',
    '-c',
    'dd if=/dev/urandom of=/dev/null bs=64k count=2000',
  ]);
  const copy = await tempDir(t, 'engines');
  await cp(dir, copy, { recursive: true });
  const notes: string[] = [];
  const read = await postprocess(
    dir,
    { tarball: false, perfPath: join(dir, 'no-perf') },
    { warn: () => {}, progress: (m) => notes.push(m) },
  );
  assert.equal(read.manifest.postprocess.engine, 'native');
  assert.equal(read.manifest.postprocess.handOver, undefined);
  assert.ok(read.manifest.postprocess.unwound?.samples, JSON.stringify(read.manifest.postprocess));
  assert.ok(
    notes.some((m) => /^unwound the stack copies of \d+ samples/.test(m)),
    notes.join('\n'),
  );
  const perf = await postprocess(copy, { tarball: false, engine: 'perf' });
  assert.equal(perf.manifest.postprocess.engine, 'perf');
  assert.equal(perf.manifest.postprocess.unwound, undefined);
});

// A file built with indirect-branch tracking (`-fcf-protection -z ibtplt`, as Ubuntu builds everything) calls through
// `.plt.sec`, which perf 6.1 names after the symbol before its PLT (`_init+0x50`) or not at all: both engines name
// those frames `<target>@plt` as perf 6.3 and later do, alike, and say so.
test('calls through .plt.sec recorded by perf 6.1: both engines name them target@plt and say so', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const version = (await execa('perf', ['version'])).stdout;
  if (!/ 6\.1\./.test(version)) return t.skip(`perf ${version}: the renaming is for perf 6.1's recordings`);
  const dir = await tempDir(t, 'engines');
  await writeFile(join(dir, 'lib.c'), '__attribute__((noinline)) int tiny(int x) { return x + 1; }\n');
  await writeFile(
    join(dir, 'main.c'),
    'int tiny(int);\nint main(void) { int x = 0; for (long i = 0; i < 2000000000L; i++) x = tiny(x); return x == 42; }\n',
  );
  const flags = ['-O1', '-fno-omit-frame-pointer', '-fcf-protection=full', '-Wl,-z,ibtplt'];
  await execa('gcc', [...flags, '-shared', '-fPIC', '-o', join(dir, 'libtiny.so'), join(dir, 'lib.c')]);
  const program = join(dir, 'main');
  await execa('gcc', [...flags, '-o', program, join(dir, 'main.c'), `-L${dir}`, '-ltiny', `-Wl,-rpath,${dir}`]);
  assert.match((await execa('readelf', ['-S', program])).stdout, /\.plt\.sec/);
  const out = join(dir, 'out');
  await mkdir(out);
  // At 4999 Hz: the stub holds about 0.2 % of the samples (0 of 1 238 at 499 Hz came out 1 time in 10).
  await execa('perf', ['record', '-F', '4999', '-g', '-e', 'cpu-clock', '-o', join(out, 'perf.data'), '--', program]);
  const native = await assertSameFold(t, out);
  const plt = [...native].filter(([stack]) => stack.endsWith(';tiny@plt'));
  assert.ok(plt.length > 0, [...native.keys()].join('\n'));
  assert.ok(![...native.keys()].some((stack) => stack.endsWith(';_init')), 'no frame named _init');
  for (const engine of ['native', 'perf'] as const) {
    const warnings: string[] = [];
    const run = await postprocess(out, { engine, tarball: false }, { warn: (w) => warnings.push(w) });
    assert.deepEqual(run.manifest.postprocess.pltRenamed, [program], engine);
    assert.ok(
      warnings.some((w) => w.includes('.plt.sec') && w.includes(program)),
      `${engine}: ${warnings.join('\n')}`,
    );
  }
  t.diagnostic(`${plt.reduce((n, [, count]) => n + count, 0)} samples in tiny@plt`);

  // As collect records: -N --buildid-mmap leaves perf.data without a build-id table, and the files are kept in the
  // folder; the perf engine finds the .plt.sec files among the kept ones.
  const kept = join(dir, 'kept');
  await mkdir(kept);
  await recordCommand(join(kept, 'perf.data'), [program], ['-N', '--buildid-mmap']);
  const files = await TargetFiles.open(process.pid);
  const folder = await OutputFolder.open(kept);
  try {
    const wanted = [program, join(dir, 'libtiny.so')].map((path) => ({ path }));
    const outcomes = await keepBinaries(wanted, files, folder, new Map<string, KeptBinary>());
    assert.deepEqual(
      outcomes.map((o) => o.status),
      ['kept', 'kept'],
    );
  } finally {
    await folder.close();
    await files.close();
  }
  const keptFold = await assertSameFold(t, kept);
  assert.ok([...keptFold.keys()].some((stack) => stack.endsWith(';tiny@plt')));
  const perfRun = await postprocess(kept, { engine: 'perf', tarball: false }, { warn: () => {} });
  assert.deepEqual(perfRun.manifest.postprocess.pltRenamed, [program]);
});

// A zstd frame the built-in engine does not decode (a window past 2 MiB), met only deep in a recording where the
// engine choice does not look: the built-in engine stops there, and under the default engine perf script reads the
// recording instead, from the start, with the same warning and manifest entry as a hand-over decided up front.
test('a second zstd frame with an 8 MiB window: the default engine hands the recording to perf when it meets it', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'engines');
  const load = 'dd if=/dev/urandom of=/dev/null bs=64k count=4000';
  const piped = await execa('sh', ['-c', `perf record -q -z -g -F 999 -e cpu-clock -o - -- ${load} 2>/dev/null`], {
    encoding: 'buffer',
    stripFinalNewline: false,
  });
  const original: Buffer = Buffer.from(piped.stdout);
  // The records, the compressed ones decompressed in place.
  const plain: Buffer[] = [];
  const decoded: Buffer[] = [];
  const decoder = new Decompress((chunk) => decoded.push(Buffer.from(chunk)));
  let compressedAt = -1;
  for (let at = 16; at + 8 <= original.length;) {
    const type = original.readUInt32LE(at);
    const size = original.readUInt16LE(at + 6);
    let next = at + size;
    if (type === 66) next += Math.ceil(original.readUInt32LE(at + 8) / 8) * 8;
    if (type === 81) {
      if (compressedAt < 0) compressedAt = plain.length;
      decoder.push(original.subarray(at + 8, at + size));
    } else plain.push(original.subarray(at, next));
    at = next;
  }
  assert.ok(compressedAt >= 0, 'the recording holds compressed records');
  const records = Buffer.concat(decoded);
  // Cut at a record boundary near the middle: two frames of raw blocks, the second with an 8 MiB window.
  let half = 0;
  while (half < records.length / 2) half += records.readUInt16LE(half + 6);
  const frame = (bytes: Buffer, windowLog: number) => {
    const parts: Buffer[] = [Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, (windowLog - 10) << 3])];
    for (let at = 0; at < bytes.length; at += 32768) {
      const body = bytes.subarray(at, at + 32768);
      const header = (body.length << 3) | (at + 32768 >= bytes.length ? 1 : 0);
      parts.push(Buffer.from([header & 0xff, (header >> 8) & 0xff, header >> 16]), body);
    }
    return Buffer.concat(parts);
  };
  // Each frame in payloads of its own: perf 6.1's zstd_decompress_stream mis-places what follows a frame's end inside
  // one payload (it moves its output pointer without resetting the position), so perf never writes two frames.
  const compressed: Buffer[] = [];
  for (const stream of [frame(records.subarray(0, half), 19), frame(records.subarray(half), 23)])
    for (let at = 0; at < stream.length; at += 16384) {
      const payload = stream.subarray(at, at + 16384);
      const record = Buffer.alloc(8 + payload.length);
      record.writeUInt32LE(81, 0);
      record.writeUInt16LE(record.length, 6);
      payload.copy(record, 8);
      compressed.push(record);
    }
  const forged = Buffer.concat([
    original.subarray(0, 16),
    ...plain.slice(0, compressedAt),
    ...compressed,
    ...plain.slice(compressedAt),
  ]);
  await writeFile(join(dir, 'perf.data'), forged);

  const warnings: string[] = [];
  const run = await postprocess(dir, { tarball: false }, { warn: (w) => warnings.push(w) });
  assert.equal(run.manifest.postprocess.engine, 'perf');
  assert.match(run.manifest.postprocess.handOver ?? '', /zstd level above 7/);
  assert.ok(
    warnings.some((w) => /perf script reads it instead/.test(w)),
    warnings.join('\n'),
  );
  const perf = await outputs(t, dir, 'perf');
  assert.deepEqual(run.fold.stacks, perf.stacks);
  assert.ok(run.fold.keptSamples > 10, `${run.fold.keptSamples} samples`);
  // Asked for by name, the built-in engine stops with the remedy instead.
  await assert.rejects(postprocess(dir, { tarball: false, engine: 'native' }), (error: unknown) => {
    assert.ok(isProfcpuError(error, 'NEEDS_PERF'), String(error));
    return true;
  });
});

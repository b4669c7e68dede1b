import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, cp, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { list } from 'tar';
import { layout } from '../../src/output/layout.js';
import { startTarball } from '../../src/output/tarball.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { decodePprof, pprofToFolded, stringAt } from '../support/pprof.js';
import { canRecord, have, isRoot, need, needCommand } from '../support/requirements.js';
import {
  burnFunctions,
  keepPerfMap,
  recordNamespaced,
  recordNode,
  recordNothing,
  type Recording,
} from './recording.js';

let root: string;
/** A folder as collect leaves it: perf.data, target/perf-<pid>.map and target/target.json; never modified. */
let recorded: string;
let recording: Recording | undefined;

before(async () => {
  root = await mkdtemp(join(tmpdir(), 'profcpu-postprocess-'));
  recorded = join(root, 'recorded');
  if (isRoot() && have('perf')) {
    recording = await recordNode(recorded);
    await keepPerfMap(recorded, recording);
  }
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

let copies = 0;
/** A fresh copy of the recorded folder, or undefined (test skipped) without root and perf. */
async function folder(t: TestContext): Promise<string | undefined> {
  if (!canRecord(t) || !recording) return undefined;
  const dir = join(root, `case-${++copies}`);
  await cp(recorded, dir, { recursive: true });
  return dir;
}

const sha256 = async (path: string) =>
  createHash('sha256')
    .update(await readFile(path))
    .digest('hex');
// FlameScope (FACTS.md §5): a "perf" file's first non-# line, and each frame line.
const flamescopeEvent = / +([0-9.]+): .+?:/;
const flamescopeFrame = /^[\t ]*[0-9a-fA-F]+ (.+) \((.*?)\)$/;

test('a real recording becomes every output, named, hashed and bundled', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const progress: string[] = [];
  const warnings: string[] = [];
  const result = await postprocess(
    dir,
    // perf script's own progress is checked below; the built-in engine has its case in engines.test.ts.
    { title: 'burn test', engine: 'perf' },
    { progress: (m) => progress.push(m), warn: (m) => warnings.push(m), manifestExtra: { target: { pid: 1 } } },
  );
  const names = [
    layout.perfScript,
    layout.foldedStacks,
    layout.flamegraphSvg,
    layout.flamegraphHtml,
    layout.speedscope,
    layout.pprof,
    layout.manifest,
    layout.tarball,
  ];
  assert.deepEqual(Object.keys(result.files).sort(), [...names].sort());
  for (const name of names) assert.ok((await stat(join(dir, name))).size > 0, name);
  assert.deepEqual(warnings, []);
  assert.match(progress.join('\n'), /perf script: [\d.]+ MB read, [\d ]+ samples/);

  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  const svg = await readFile(join(dir, layout.flamegraphSvg), 'utf8');
  for (const name of burnFunctions) {
    assert.ok(folded.includes(name), `${name} in folded stacks`);
    assert.ok(svg.includes(name), `${name} in the SVG`);
  }
  assert.ok(svg.includes('burn test'));
  assert.ok(result.fold.keptSamples > 50, `${result.fold.keptSamples} samples`);

  // pprof, read by a decoder we did not write: the same stacks as the folded file, CPU time by the sampling frequency.
  const profile = decodePprof(await readFile(join(dir, layout.pprof)));
  assert.deepEqual(pprofToFolded(profile), parseFoldedText(folded).stacks);
  assert.deepEqual(
    profile.sampleType.map((type) => `${stringAt(profile, type.type)}/${stringAt(profile, type.unit)}`),
    ['samples/count', 'cpu/nanoseconds'],
  );
  assert.equal(Number(profile.period), Math.round(1e9 / 199)); // recordNode's -F 199

  // FlameScope recognises the text, and it lives alone in its folder.
  assert.deepEqual(await readdir(join(dir, 'flamescope')), ['perf_script.out']);
  const script = (await readFile(join(dir, layout.perfScript), 'utf8')).split('\n');
  const firstEvent = script.find((line) => line !== '' && !line.startsWith('#'));
  assert.match(firstEvent ?? '', flamescopeEvent);
  const frames = script.filter((line) => line.startsWith('\t'));
  assert.ok(frames.length > 100);
  for (const line of frames) assert.match(line, flamescopeFrame);

  // The manifest: hashes match the files; everything but itself and the tarball is listed.
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as typeof result.manifest;
  assert.deepEqual(manifest.target, { pid: 1 });
  assert.equal(manifest.samples.kept, result.fold.keptSamples);
  assert.equal(manifest.samples.distinctStacks, result.fold.stacks.size);
  assert.match(manifest.host.perfVersion, /^\d+\.\d+/);
  assert.equal(manifest.recording.events?.[0], 'cpu-clock');
  assert.deepEqual(manifest.postprocess.commands, [
    ['perf', 'version'],
    ['perf', 'script', '-i', 'perf.data', '--header', '--no-inline'],
  ]);
  assert.deepEqual(manifest.postprocess.perfMaps, [
    { from: `target/perf-${recording!.pid}.map`, placedAt: `/tmp/perf-${recording!.pid}.map` },
  ]);
  assert.deepEqual(manifest.unhashed.files, [layout.manifest, layout.tarball]);
  assert.deepEqual(
    manifest.files.map((f) => f.path),
    [
      layout.flamegraphHtml,
      layout.flamegraphSvg,
      layout.perfScript,
      layout.foldedStacks,
      layout.perfData,
      layout.pprof,
      layout.speedscope,
      layout.procMaps,
      `target/perf-${recording!.pid}.map`,
      'target/target.json',
    ],
  );
  for (const file of manifest.files) {
    assert.equal(file.sha256, await sha256(join(dir, file.path)), file.path);
    assert.equal(file.bytes, (await stat(join(dir, file.path))).size, file.path);
  }

  // The tarball: every file under the folder's name, the raw data first (archived while the outputs were made), fixed
  // modes, and the same bytes when built again.
  const top = dir.split('/').at(-1)!;
  const entries: { path: string; mode: number | undefined }[] = [];
  await list({ file: join(dir, layout.tarball), onReadEntry: (e) => entries.push({ path: e.path, mode: e.mode }) });
  const isRaw = (path: string) => /^[^/]+\/(perf\.data|target(\/.*)?)$/.test(path.replace(/\/$/, ''));
  // Then each output as it was made (the order of `names`), the manifest last.
  const made = names.filter((name) => name !== layout.tarball);
  const files = [...manifest.files.map((f) => f.path), layout.manifest].sort().map((p) => `${top}/${p}`);
  assert.deepEqual(
    entries.filter((e) => !e.path.endsWith('/')).map((e) => e.path),
    [...files.filter(isRaw), ...made.map((p) => `${top}/${p}`)],
  );
  assert.deepEqual(files.filter((f) => !isRaw(f)).sort(), made.map((p) => `${top}/${p}`).sort());
  for (const e of entries) {
    const [file, folder] = isRaw(e.path) ? [0o600, 0o700] : [0o644, 0o755];
    assert.equal(e.mode, e.path.endsWith('/') ? folder : file, e.path);
  }
  const before = await readFile(join(dir, layout.tarball));
  const output = await OutputFolder.open(dir);
  const again = await startTarball(dir, { folder: output, name: layout.tarball }, [layout.perfData, layout.targetDir], {
    mtime: new Date(Math.floor((await stat(join(dir, 'perf.data'))).mtimeMs / 1000) * 1000),
  });
  // The FlameScope text as postprocess gives it, as it is written (in a gzip member of its own), the rest as files.
  for (const name of made.slice(0, -1))
    if (name === layout.perfScript) {
      const streamed = await again.streamFile(name);
      const text = await readFile(join(dir, name));
      for (let at = 0; at < text.length; at += 1 << 20) {
        streamed.write(text.subarray(at, at + (1 << 20)), () => {});
        await streamed.room();
      }
      await streamed.end();
    } else await again.addFile(name, name);
  await again.finish();
  await output.close();
  assert.deepEqual(await readFile(join(dir, layout.tarball)), before);
});

test('the perf map copy is placed for perf script and removed after: names resolve, /tmp is left clean', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const placed = `/tmp/perf-${recording!.pid}.map`;
  await assert.rejects(stat(placed), { code: 'ENOENT' });
  const result = await postprocess(dir, { tarball: false, resolver: undefined });
  const frames = [...result.fold.stacks.keys()].join(';');
  for (const name of burnFunctions) assert.ok(frames.includes(name), name);
  await assert.rejects(stat(placed), { code: 'ENOENT' });
  assert.equal(result.files[layout.tarball], undefined);

  // Without the copy the same frames stay unnamed: the names above came from it.
  await rm(join(dir, 'target'), { recursive: true });
  const bare = await postprocess(dir, { tarball: false, resolver: undefined });
  const bareFrames = [...bare.fold.stacks.keys()].join(';');
  for (const name of burnFunctions) assert.ok(!bareFrames.includes(name), name);
});

test('a resolver factory gets the folder and names the frames perf left unnamed', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  await rm(join(dir, layout.targetDir), { recursive: true });
  const asked: string[] = [];
  const result = await postprocess(dir, {
    tarball: false,
    resolver: async (folderAsked) => {
      asked.push(folderAsked);
      return { resolve: ({ ip }) => ({ name: `resolvedByTest_${ip.toString(16).length}`, kind: 'jit' }) };
    },
  });
  assert.deepEqual(asked, [dir]);
  const frames = [...result.fold.stacks.keys()].join(';');
  assert.match(frames, /resolvedByTest_\d+_\[j\]/);
  assert.ok(result.fold.quality.framesByKind.jit > 0);
  // The FlameScope file carries the same names, in lines FlameScope's frame pattern still reads.
  const script = (await readFile(join(dir, layout.perfScript), 'utf8')).split('\n');
  const named = script.filter((line) => /^\t *[0-9a-f]+ resolvedByTest_\d+ \(/.test(line));
  assert.ok(named.length > 0, 'resolved names in flamescope/perf_script.out');
  for (const line of named) assert.match(line, flamescopeFrame);
  assert.equal(script.filter((line) => / \[unknown\] \(/.test(line)).length, 0);
});

test('no perf.data: NO_PERF_DATA', async () => {
  await assert.rejects(postprocess(root), (e) => isProfcpuError(e, 'NO_PERF_DATA') && Boolean(e.remedy));
});

test('perf missing: NO_PERF naming the package', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  await assert.rejects(
    postprocess(dir, { perfPath: join(root, 'no-perf-here'), engine: 'perf' }),
    (e) => isProfcpuError(e, 'NO_PERF') && /linux-perf/.test(e.remedy ?? ''),
  );
  await assert.rejects(stat(join(dir, layout.flamegraphSvg)), { code: 'ENOENT' });
});

test('perf.data owned by another user: PERF_DATA_OWNER; --force reads it', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  await chown(join(dir, layout.perfData), 65534, 65534);
  await assert.rejects(postprocess(dir), (e) => isProfcpuError(e, 'PERF_DATA_OWNER') && /chown/.test(e.remedy ?? ''));
  const forced = await postprocess(dir, { force: true, tarball: false });
  assert.ok(forced.fold.keptSamples > 0);
});

test('a perf.data with no samples is NO_SAMPLES; samples all dropped by the fold is ALL_FILTERED', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  await assert.rejects(
    postprocess(dir, { fold: { eventFilter: 'no-such-event' } }),
    (e) => isProfcpuError(e, 'ALL_FILTERED') && /all samples filtered out/.test(e.message),
  );
  const empty = join(root, 'empty');
  await recordNothing(empty);
  await assert.rejects(
    postprocess(empty),
    (e) => isProfcpuError(e, 'NO_SAMPLES') && /no samples collected/.test(e.message) && Boolean(e.remedy),
  );
  // Neither failure leaves outputs behind, and the raw data stays.
  for (const d of [dir, empty]) {
    const left = (await readdir(d, { recursive: true })).sort();
    assert.ok(left.includes('perf.data'));
    assert.deepEqual(
      left.filter((f) => !f.startsWith('target') && f !== 'perf.data'),
      [],
    );
  }
});

test('a perf.data cut short fails with a remedy about the file', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const data = await readFile(join(dir, layout.perfData));
  // perf_file_header: magic, size, attr_size, attrs {offset, size}, then data {offset, size} at byte 40. Cutting the
  // data section is what a killed perf record or an incomplete copy does (cutting only the trailing feature
  // sections perf tolerates).
  const dataStart = Number(data.readBigUInt64LE(40));
  const dataSize = Number(data.readBigUInt64LE(48));
  assert.ok(dataStart + dataSize <= data.length);
  for (const fraction of [0.1, 0.5, 0.9]) {
    const end = dataStart + Math.floor(dataSize * fraction);
    await writeFile(join(dir, layout.perfData), data.subarray(0, end));
    await assert.rejects(
      postprocess(dir, { resolver: undefined, engine: 'perf' }),
      (e) => isProfcpuError(e, 'PERF_FAILED') && /damaged or cut short/.test(e.remedy ?? ''),
      `cut at ${fraction}`,
    );
  }
  await assert.rejects(stat(`/tmp/perf-${recording!.pid}.map`), { code: 'ENOENT' });
});

test('aborting while perf script streams: ABORTED, no half-written output, raw data kept', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const controller = new AbortController();
  await assert.rejects(
    postprocess(dir, { progressIntervalMs: 0 }, { signal: controller.signal, progress: () => controller.abort() }),
    (e) => isProfcpuError(e, 'ABORTED'),
  );
  const left = (await readdir(dir, { recursive: true })).sort();
  assert.deepEqual(left, [
    'perf.data',
    'target',
    layout.procMaps,
    `target/perf-${recording!.pid}.map`,
    'target/target.json',
  ]);
  await assert.rejects(stat(`/tmp/perf-${recording!.pid}.map`), { code: 'ENOENT' });
});

test('an output that cannot be written is an IO error with a remedy, and perf.data stays', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  // A file where the FlameScope folder should be.
  await writeFile(join(dir, 'flamescope'), 'in the way');
  await assert.rejects(
    postprocess(dir),
    (e) => isProfcpuError(e, 'IO') && /flamescope/.test(e.message) && Boolean(e.remedy),
  );
  assert.ok((await stat(join(dir, layout.perfData))).size > 0);
  await assert.rejects(stat(`/tmp/perf-${recording!.pid}.map`), { code: 'ENOENT' });
});

test('a target gone from its own PID namespace: its map copy is placed under the PID perf recorded', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'unshare', 'util-linux')) return;
  const dir = join(root, 'namespaced');
  const target = await recordNamespaced(dir);
  if (!need(t, target.nspid === 1 && target.pid !== 1, 'a PID namespace from unshare --pid')) return;
  // What collect keeps: the map under its namespace name, and both PIDs.
  await mkdir(join(dir, layout.targetDir));
  await writeFile(join(dir, layout.perfMap(target.nspid)), target.map);
  await writeFile(join(dir, layout.targetInfo), JSON.stringify({ pid: target.pid, nspid: target.nspid }));

  // No resolver: the names must come from perf itself reading the placed copy.
  const result = await postprocess(dir, { tarball: false, resolver: undefined, engine: 'perf' });
  assert.ok([...result.fold.stacks.keys()].some((stack) => stack.includes('profcpuFibonacciBurner')));
  assert.deepEqual(result.manifest.postprocess.perfMaps, [
    { from: 'target/perf-1.map', placedAt: `/tmp/perf-${target.pid}.map` },
  ]);
  await assert.rejects(stat(`/tmp/perf-${target.pid}.map`), { code: 'ENOENT' });
  // The fallback without target.json (placing it as /tmp/perf-1.map) is tested in perf-maps.test.ts with a
  // private folder: on a shared machine another PID-1 target's perf script could pick such a copy up.
});

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { buildManifest, formatManifest, hashFiles, toolInfo, type ManifestFacts } from '../../src/output/manifest.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-manifest-'));
  await mkdir(join(dir, 'target'));
  await writeFile(join(dir, 'perf.data'), 'abc');
  await writeFile(join(dir, 'target', 'perf-1.map'), '');
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const facts: ManifestFacts = {
  createdAt: '2026-11-22T03:00:00.000Z',
  host: { hostname: 'vm', kernelRelease: '6.1', perfVersion: '6.1.187', node: 'v20', platform: 'linux', arch: 'x64' },
  recording: { perfVersion: '6.1.187' },
  postprocess: {
    commands: [['perf', 'script']],
    durationsMs: { render: 1 },
    perfScriptBytes: 10,
    perfScriptIsolated: true,
    perfMaps: [],
    keptBinariesPlaced: 0,
  },
  samples: { parsed: 2, kept: 1, weight: 1, distinctStacks: 1, events: ['cpu-clock'] },
  skipped: { 'garbage line': 1 },
  naming: {
    samples: 1,
    fullyNamed: 1,
    fullyNamedExceptLibraries: 0,
    unnamedLibraries: {},
    fullyNamedExceptCoreclr: 1,
    framesByKind: { jit: 1, readytorun: 0, native: 0, 'native-unnamed': 0, kernel: 0, unknown: 0 },
    samplesByLeafKind: { jit: 1, readytorun: 0, native: 0, 'native-unnamed': 0, kernel: 0, unknown: 0 },
    brokenChains: 0,
    brokenChainsByFile: {},
  },
};

test('hashFiles gives the SHA-256 and size of each file', async () => {
  assert.deepEqual(await hashFiles(dir, ['perf.data', 'target/perf-1.map']), [
    { path: 'perf.data', bytes: 3, sha256: 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad' },
    { path: 'target/perf-1.map', bytes: 0, sha256: 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' },
  ]);
});

test('the manifest keeps its own fields over the caller’s, sorts files, and says what it cannot hash', () => {
  const { manifest, collisions } = buildManifest(
    { name: 'profcpu', version: '1.2.3' },
    facts,
    [
      { path: 'z', bytes: 1, sha256: '1' },
      { path: 'a', bytes: 2, sha256: '2' },
    ],
    { target: { pid: 42 }, samples: 'not yours', collect: { phasesMs: { record: 2000 } } },
  );
  assert.deepEqual(collisions, ['samples']);
  assert.deepEqual(manifest.samples, facts.samples);
  assert.deepEqual(manifest.target, { pid: 42 });
  assert.deepEqual(
    manifest.files.map((f) => f.path),
    ['a', 'z'],
  );
  assert.deepEqual(manifest.unhashed.files, ['manifest.json', 'prof.tar.gz']);
  assert.equal(manifest.manifestVersion, 1);
});

test('formatManifest sorts keys at every level, whatever order they were built in', () => {
  const a = buildManifest({ name: 'p', version: '1' }, facts, [], { b: { y: 1, x: [{ d: 1, c: 2 }] }, a: 1 });
  const reordered = { ...facts, skipped: { 'garbage line': 1 }, createdAt: facts.createdAt };
  const b = buildManifest({ version: '1', name: 'p' }, reordered, [], { a: 1, b: { x: [{ c: 2, d: 1 }], y: 1 } });
  const text = formatManifest(a.manifest);
  assert.equal(text, formatManifest(b.manifest));
  assert.ok(text.endsWith('}\n'));
  const keys = Object.keys(JSON.parse(text) as object);
  assert.deepEqual(keys, [...keys].sort());
  assert.ok(text.indexOf('"c": 2') < text.indexOf('"d": 1'));
});

test('toolInfo reads profcpu’s package.json', async () => {
  const tool = await toolInfo();
  assert.equal(tool.name, 'profcpu');
  assert.match(tool.version, /^\d+\.\d+\.\d+/);
});

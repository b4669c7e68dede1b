// The frames profcpu cannot name, named by a backend: profile.pb.gz of a program spinning in a stripped library whose
// debug file profcpu does not have carries each unnamed frame's address in the library's mapping (with its build-id),
// and Google's pprof, given the library with its symbols under that build-id, names them. Both engines place them
// alike (perf 6.1 prints an offset into the file, which the built-in engine prints too).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFile, cp, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import type { Profile } from 'pprof-format';
import { layout } from '../../src/output/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { buildNativeLibIfPossible, needNativeLib } from '../fixtures/native-lib/build.js';
import { runCli } from '../support/cli.js';
import { needGooglePprof } from '../support/google-pprof.js';
import { decodePprof, pprofToFolded, stringAt } from '../support/pprof.js';
import { canRecord, need } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

/** Each location at an address: its address in hex and the names of its lines. */
function placedLocations(profile: Profile): Map<string, string> {
  const functions = new Map(profile.function.map((f) => [Number(f.id), stringAt(profile, f.name)]));
  return new Map(
    profile.location
      .filter((l) => Number(l.address) !== 0)
      .map((l) => [
        BigInt(l.address).toString(16),
        l.line.map((line) => functions.get(Number(line.functionId))).join('|'),
      ]),
  );
}

test('unnamed frames of a stripped library: addresses in its mapping, named by Google’s pprof from its symbols', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'pprof-addresses');
  const lib = needNativeLib(t, buildNativeLibIfPossible(join(work, 'lib')));
  if (!lib) return;
  const pprof = await needGooglePprof(t);
  if (!pprof) return;
  // The program and its stripped library alone: no debug file beside them for perf to find by its debuglink.
  const app = join(work, 'app');
  await mkdir(app);
  await copyFile(lib.program, join(app, 'hotprog'));
  await copyFile(lib.stripped, join(app, 'libhotlib.so'));
  const target = spawn(join(app, 'hotprog'), ['60'], { stdio: 'ignore' });
  t.after(() => target.kill('SIGKILL'));
  const out = join(work, 'out');
  const collect = await runCli(
    ['collect', '--pid', String(target.pid), '--duration', '2', '--symbols', 'none', '--output', out],
    { cwd: work },
  );
  if (!need(t, collect.exitCode === 0, `a working collect (${String(collect.all).slice(-300)})`)) return;
  target.kill('SIGKILL');

  const folded = parseFoldedText(await readFile(join(out, layout.foldedStacks), 'utf8')).stacks;
  const bytes = await readFile(join(out, layout.pprof));
  const profile = decodePprof(bytes);
  assert.deepEqual(pprofToFolded(profile), folded, 'the addresses change nothing read back as folded stacks');
  const unnamed = [...folded].filter(([stack]) => stack.endsWith(';[libhotlib.so]'));
  const samples = [...folded.values()].reduce((a, b) => a + b, 0);
  assert.ok(unnamed.reduce((n, [, w]) => n + w, 0) > samples * 0.9, 'the library is left unnamed, as meant');

  // Every location of the library's unnamed code is placed in its mapping, which carries its build-id.
  const mapping = profile.mapping.find((m) => stringAt(profile, m.filename).endsWith('/libhotlib.so'))!;
  assert.ok(mapping, profile.mapping.map((m) => stringAt(profile, m.filename)).join(' '));
  assert.equal(stringAt(profile, mapping.buildId), lib.buildId);
  assert.equal(mapping.hasFunctions, false);
  const placed = placedLocations(profile);
  assert.ok(placed.size > 0);
  for (const [address, names] of placed) {
    assert.equal(names, '[libhotlib.so]');
    const at = BigInt(`0x${address}`);
    assert.ok(at >= BigInt(mapping.memoryStart) && at < BigInt(mapping.memoryLimit), address);
  }
  const functions = new Map(profile.function.map((f) => [Number(f.id), stringAt(profile, f.name)]));
  for (const l of profile.location)
    if (l.line.some((line) => functions.get(Number(line.functionId)) === '[libhotlib.so]'))
      assert.notEqual(Number(l.address), 0, 'an unnamed frame without its address');

  // Google's pprof finds the library with its symbols by the build-id and names those frames.
  const binaries = join(work, 'binaries');
  await mkdir(join(binaries, lib.buildId), { recursive: true });
  await copyFile(lib.full, join(binaries, lib.buildId, 'libhotlib.so'));
  const symbolised = join(work, 'symbolised.pb.gz');
  const run = await execa(pprof, ['-symbolize=local', '-proto', '-output', symbolised, join(out, layout.pprof)], {
    env: { PPROF_BINARY_PATH: binaries, HOME: work },
    reject: false,
    all: true,
  });
  assert.equal(run.exitCode, 0, run.all);
  const named = pprofToFolded(decodePprof(await readFile(symbolised)));
  let hot = 0;
  for (const [stack, n] of named) if (/;profcpu_hot_outer;profcpu_hot_inner$/.test(stack)) hot += n;
  t.diagnostic(`${hot} of ${samples} samples named profcpu_hot_outer;profcpu_hot_inner by Google's pprof`);
  assert.ok(hot > samples * 0.9, [...named].slice(0, 5).join('\n'));
  assert.ok(![...named.keys()].some((stack) => stack.includes('[libhotlib.so]')), [...named.keys()].join('\n'));

  // perf script's text (perf 6.1: offsets into the file) places them at the same addresses.
  const copy = join(work, 'perf-engine');
  await cp(out, copy, { recursive: true });
  await postprocess(copy, { engine: 'perf', tarball: false });
  assert.deepEqual(placedLocations(decodePprof(await readFile(join(copy, layout.pprof)))), placed);
});

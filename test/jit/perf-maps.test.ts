import assert from 'node:assert/strict';
import { chown, mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, test } from 'node:test';
import { placePerfMaps, readTargetIds } from '../../src/jit/perf-maps.js';
import { needRoot } from '../support/requirements.js';

let dir: string;
let perfTmp: string;
let warnings: string[];
const warn = (message: string) => warnings.push(message);
const euid = process.geteuid?.();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-maps-'));
  perfTmp = await mkdtemp(join(tmpdir(), 'profcpu-perftmp-'));
  await mkdir(join(dir, 'target'));
  warnings = [];
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
  await rm(perfTmp, { recursive: true, force: true });
});

test('the namespace map is placed under the pid perf saw, then removed', async () => {
  await writeFile(join(dir, 'target/perf-1.map'), '7f00 10 JS:*burn\n');
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 4242, nspid: 1, comm: 'node' }));
  const placement = await placePerfMaps(dir, warn, { perfTmp, euid });
  assert.deepEqual(
    placement.placed.map(({ from, placedAt }) => ({ from, placedAt })),
    [{ from: 'target/perf-1.map', placedAt: join(perfTmp, 'perf-4242.map') }],
  );
  assert.equal(await readFile(join(perfTmp, 'perf-4242.map'), 'utf8'), '7f00 10 JS:*burn\n');
  assert.equal((await stat(join(perfTmp, 'perf-4242.map'))).uid, process.getuid?.());
  await placement.remove();
  await placement.remove();
  assert.deepEqual(await readdir(perfTmp), []);
  assert.deepEqual(warnings, []);
});

test('a map already in place is never replaced nor removed; a larger one (live target) without a warning', async () => {
  await writeFile(join(dir, 'target/perf-8.map'), 'ours\n');
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 8, nspid: 8 }));
  await writeFile(join(perfTmp, 'perf-8.map'), 'ours\nand what the live target added since\n');
  assert.deepEqual((await placePerfMaps(dir, warn, { perfTmp, euid })).placed, []);
  assert.deepEqual(warnings, []);

  await writeFile(join(dir, 'target/perf-7.map'), 'ours, longer than the live one\n');
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 7, nspid: 7 }));
  await writeFile(join(perfTmp, 'perf-7.map'), 'live\n');
  const placement = await placePerfMaps(dir, warn, { perfTmp, euid });
  assert.deepEqual(placement.placed, []);
  await placement.remove();
  assert.equal(await readFile(join(perfTmp, 'perf-7.map'), 'utf8'), 'live\n');
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /already exists and is smaller/);
});

test('a map in place owned by another user is left, with a warning that perf ignores it', async (t) => {
  if (!needRoot(t)) return;
  await writeFile(join(dir, 'target/perf-6.map'), 'ours\n');
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 6, nspid: 6 }));
  await writeFile(join(perfTmp, 'perf-6.map'), 'theirs, and longer\n');
  await chown(join(perfTmp, 'perf-6.map'), 65534, 65534);
  assert.deepEqual((await placePerfMaps(dir, warn, { perfTmp, euid })).placed, []);
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /owned by uid 65534: perf ignores it/);
});

test('a placed map replaced by someone else meanwhile is left alone', async () => {
  await writeFile(join(dir, 'target/perf-9.map'), 'ours\n');
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 9, nspid: 9 }));
  const placement = await placePerfMaps(dir, warn, { perfTmp, euid });
  await rm(join(perfTmp, 'perf-9.map'));
  await writeFile(join(perfTmp, 'perf-9.map'), 'a new live map\n');
  await placement.remove();
  assert.equal(await readFile(join(perfTmp, 'perf-9.map'), 'utf8'), 'a new live map\n');
});

test('without target.json each map goes under its own number, with a warning', async () => {
  await writeFile(join(dir, 'target/perf-12.map'), 'a\n');
  await writeFile(join(dir, 'target/perf-3.map'), 'b\n');
  await writeFile(join(dir, 'target/jit-3.dump'), 'not a map');
  const placement = await placePerfMaps(dir, warn, { perfTmp, euid });
  assert.deepEqual(
    placement.placed.map((p) => p.placedAt),
    [join(perfTmp, 'perf-3.map'), join(perfTmp, 'perf-12.map')],
  );
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /no usable target\/target\.json/);
  await placement.remove();
  assert.deepEqual(await readdir(perfTmp), []);
});

test('no target folder, or target.json naming a map not kept: nothing placed, no error', async () => {
  await rm(join(dir, 'target'), { recursive: true });
  assert.deepEqual((await placePerfMaps(dir, warn, { perfTmp, euid })).placed, []);
  await mkdir(join(dir, 'target'));
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 5, nspid: 1 }));
  assert.deepEqual((await placePerfMaps(dir, warn, { perfTmp, euid })).placed, []);
  assert.deepEqual(warnings, []);
});

test('readTargetIds: nspid defaults to pid; bad JSON or pid is ignored with a warning', async () => {
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 31 }));
  assert.deepEqual(await readTargetIds(dir, warn), { pid: 31, nspid: 31 });
  await writeFile(join(dir, 'target/target.json'), '{ "pid": ');
  assert.equal(await readTargetIds(dir, warn), undefined);
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: '31' }));
  assert.equal(await readTargetIds(dir, warn), undefined);
  assert.equal(warnings.length, 2);
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  copyFileSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { parsePerfConfigValue, perfBuildIdDir } from '../../src/perf/buildid-cache.js';
import { placeDebugFile } from '../../src/debug-files/debug-placement.js';
import { buildNativeLibIfPossible, needNativeLib, type NativeLib } from '../fixtures/native-lib/build.js';
import { canRecord, needCommand } from '../support/requirements.js';

let work: string;
let lib: NativeLib | undefined;

before(() => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-buildid-'));
  lib = buildNativeLibIfPossible(join(work, 'lib'));
});
after(() => rmSync(work, { recursive: true, force: true }));

test('perf config output: the value of one key', () => {
  assert.equal(parsePerfConfigValue('buildid.dir=/srv/debug\n', 'buildid.dir'), '/srv/debug');
  assert.equal(parsePerfConfigValue('record.build-id=cache\nbuildid.dir = /a=b \n', 'buildid.dir'), '/a=b');
  assert.equal(parsePerfConfigValue('', 'buildid.dir'), undefined);
  assert.equal(parsePerfConfigValue('buildid.dir=\n', 'buildid.dir'), undefined);
});

test('the build-id folder perf uses: explicit, else its buildid.dir setting, else $HOME/.debug', async (t) => {
  const home = join(work, 'home');
  mkdirSync(home, { recursive: true });
  assert.equal(await perfBuildIdDir({ explicit: '/x/debug', home }), '/x/debug');
  assert.equal(await perfBuildIdDir({ home, perfPath: join(work, 'no-perf-here') }), join(home, '.debug'));
  if (!needCommand(t, 'perf', 'linux-perf')) return;
  assert.equal(await perfBuildIdDir({ home }), join(home, '.debug'));
  writeFileSync(join(home, '.perfconfig'), `[buildid]\n\tdir = ${work}/elsewhere\n`);
  assert.equal(await perfBuildIdDir({ home }), `${work}/elsewhere`);
  rmSync(join(home, '.perfconfig'));
});

test('into an empty cache: a new entry named after the target’s path, and .build-id pointing at it', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const dir = join(work, 'empty-cache');
  const placed = await placeDebugFile({
    buildIdDir: dir,
    buildId: l.buildId,
    debugFile: l.debug,
    dsoPath: '/tmp/app/libhotlib.so',
  });
  const entry = join(dir, 'tmp/app/libhotlib.so', l.buildId);
  assert.deepEqual(placed, { path: join(entry, 'debug'), how: 'linked' });
  assert.deepEqual(readFileSync(placed.path), readFileSync(l.debug));
  const link = join(dir, '.build-id', l.buildId.slice(0, 2), l.buildId.slice(2));
  assert.equal(readlinkSync(link), `../../tmp/app/libhotlib.so/${l.buildId}`);
  const again = await placeDebugFile({ buildIdDir: dir, buildId: l.buildId, debugFile: l.debug, dsoPath: '/x' });
  assert.deepEqual(again, { path: placed.path, how: 'present' });
});

test('into an entry perf record made: `debug` next to its `elf`; a dangling link is remade', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const dir = join(work, 'perf-cache');
  const entry = join(dir, 'usr/lib/libhotlib.so', l.buildId);
  mkdirSync(entry, { recursive: true });
  writeFileSync(join(entry, 'elf'), readFileSync(l.stripped));
  const link = join(dir, '.build-id', l.buildId.slice(0, 2), l.buildId.slice(2));
  mkdirSync(join(link, '..'), { recursive: true });
  symlinkSync(`../../usr/lib/libhotlib.so/${l.buildId}`, link);
  const placed = await placeDebugFile({ buildIdDir: dir, buildId: l.buildId, debugFile: l.debug, dsoPath: '/other' });
  assert.equal(placed.path, join(realpathSync(entry), 'debug'));
  assert.equal(existsSync(join(dir, 'other')), false);

  rmSync(join(dir, 'usr'), { recursive: true });
  const remade = await placeDebugFile({
    buildIdDir: dir,
    buildId: l.buildId,
    debugFile: l.debug,
    dsoPath: '/new/lib.so',
  });
  assert.equal(remade.path, join(dir, 'new/lib.so', l.buildId, 'debug'));
  assert.ok(lstatSync(link).isSymbolicLink());
});

test('an entry in an old layout (link to a file) is an error with a remedy', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l) return;
  const dir = join(work, 'old-cache');
  const link = join(dir, '.build-id', l.buildId.slice(0, 2), l.buildId.slice(2));
  mkdirSync(join(link, '..'), { recursive: true });
  writeFileSync(join(dir, 'elf-file'), 'x');
  symlinkSync('../../elf-file', link);
  await assert.rejects(
    placeDebugFile({ buildIdDir: dir, buildId: l.buildId, debugFile: l.debug, dsoPath: '/a' }),
    (e: unknown) => isProfcpuError(e, 'IO') && /old layout/.test(e.message) && /rm /.test(e.remedy ?? ''),
  );
});

test('perf script names the stripped library’s static functions once `debug` is placed', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l || !canRecord(t)) return;
  const home = join(work, 'perf-home');
  mkdirSync(home, { recursive: true });
  const env = { ...process.env, HOME: home };
  // The program and its stripped library alone: with libhotlib.so.debug beside it, perf would follow the debuglink.
  const app = join(work, 'app');
  mkdirSync(app);
  copyFileSync(l.program, join(app, 'hotprog'));
  copyFileSync(l.stripped, join(app, 'libhotlib.so'));
  const data = join(work, 'perf.data');
  const program = join(app, 'hotprog');
  execFileSync('perf', ['record', '-q', '-e', 'cpu-clock', '-F', '499', '-g', '-o', data, '--', program, '1'], {
    env,
    stdio: 'ignore',
  });
  const script = () =>
    execFileSync('perf', ['script', '--no-inline', '-i', data], { env, encoding: 'utf8', maxBuffer: 1 << 28 });
  const before = script();
  assert.match(before, /\[unknown\] \(.*libhotlib\.so\)/);
  assert.doesNotMatch(before, /profcpu_hot_inner/);
  const buildIdDir = await perfBuildIdDir({ home });
  await placeDebugFile({ buildIdDir, buildId: l.buildId, debugFile: l.debug, dsoPath: join(app, 'libhotlib.so') });
  assert.match(script(), /profcpu_hot_inner\+0x[0-9a-f]+ \(.*libhotlib\.so\)/);
});

test('placed before perf record made the entry: record keeps it and perf script names the functions', async (t) => {
  const l = needNativeLib(t, lib);
  if (!l || !canRecord(t)) return;
  const home = join(work, 'perf-home-first');
  const app = join(work, 'app-first');
  mkdirSync(app, { recursive: true });
  copyFileSync(l.program, join(app, 'hotprog'));
  copyFileSync(l.stripped, join(app, 'libhotlib.so'));
  const buildIdDir = await perfBuildIdDir({ home });
  await placeDebugFile({ buildIdDir, buildId: l.buildId, debugFile: l.debug, dsoPath: join(app, 'libhotlib.so') });
  const env = { ...process.env, HOME: home };
  const data = join(work, 'perf-first.data');
  execFileSync(
    'perf',
    ['record', '-q', '-e', 'cpu-clock', '-F', '499', '-g', '-o', data, '--', join(app, 'hotprog'), '1'],
    { env, stdio: 'ignore' },
  );
  const text = execFileSync('perf', ['script', '--no-inline', '-i', data], {
    env,
    encoding: 'utf8',
    maxBuffer: 1 << 28,
  });
  assert.match(text, /profcpu_hot_inner\+0x[0-9a-f]+ \(.*libhotlib\.so\)/);
  // perf record added its copy of the binary next to the debug file.
  assert.ok(existsSync(join(buildIdDir, app, 'libhotlib.so', l.buildId, 'elf')));
});

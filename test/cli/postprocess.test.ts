import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chown, cp, mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { toOptions } from '../../src/cli/postprocess.js';
import { runCli } from '../support/cli.js';
import { canRecord, have, isRoot } from '../support/requirements.js';
import { burnFunctions, keepPerfMap, recordNode } from '../postprocess/recording.js';

let root: string;
let recorded: string | undefined;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'profcpu-cli-postprocess-'));
  if (isRoot() && have('perf')) {
    recorded = join(root, 'recorded');
    await keepPerfMap(recorded, await recordNode(recorded, 1000));
  }
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

let copies = 0;
async function folder(t: TestContext): Promise<string | undefined> {
  if (!canRecord(t) || !recorded) return undefined;
  const dir = join(root, `case-${++copies}`);
  await cp(recorded, dir, { recursive: true });
  return dir;
}

test('`postprocess -dir D` (the original tool’s single-dash options) writes every output and lists it; progress on stderr', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const run = await runCli([
    'postprocess',
    '-dir',
    dir,
    '--title',
    'cli test',
    '--keep-args',
    '--colors',
    'hot',
    '--engine',
    'perf',
  ]);
  assert.equal(run.exitCode, 0, String(run.all));
  for (const name of [layout.perfScript, layout.foldedStacks, layout.flamegraphSvg, layout.manifest, layout.tarball]) {
    assert.ok((await stat(join(dir, name))).isFile(), name);
    assert.ok(String(run.stdout).includes(name), `${name} listed`);
  }
  assert.match(String(run.stdout), /FlameScope: point it at the folder .*flamescope\//);
  assert.match(String(run.stderr), /perf script: [\d.]+ MB read/);
  const svg = await readFile(join(dir, layout.flamegraphSvg), 'utf8');
  assert.ok(svg.includes('cli test'));
  for (const name of burnFunctions) assert.ok(svg.includes(name), name);
});

test('`--dir D --quiet` prints no progress, only the result', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const run = await runCli(['postprocess', '--dir', dir, '--quiet', '--no-tarball']);
  assert.equal(run.exitCode, 0, String(run.all));
  assert.equal(String(run.stderr), '');
  await assert.rejects(stat(join(dir, layout.tarball)), { code: 'ENOENT' });
});

test('errors print the message and the remedy, exit 1; no --dir is a usage error, exit 2', async (t) => {
  const missing = await runCli(['postprocess', '--dir', join(root, 'nowhere')]);
  assert.equal(missing.exitCode, 1);
  assert.match(String(missing.stderr), /profcpu: error: .*nowhere does not exist\n {2}fix: /);

  const usage = await runCli(['postprocess']);
  assert.equal(usage.exitCode, 2);
  assert.match(String(usage.stderr), /--dir/);

  const dir = await folder(t);
  if (!dir) return;
  // No perf installed: --engine perf says what to do; with no --engine, the built-in engine (the default) is used.
  const noPerfPath = { env: { PATH: join(root, 'empty-path') } };
  const noPerf = await runCli(['postprocess', '--dir', dir, '--engine', 'perf'], noPerfPath);
  assert.equal(noPerf.exitCode, 1);
  assert.match(
    String(noPerf.stderr),
    /perf was not found[\s\S]*fix: Install perf \(Debian: apt-get install linux-perf\)/,
  );
  assert.match(String(noPerf.stderr), /--engine native/);
  const native = await runCli(['postprocess', '--dir', dir, '-q'], noPerfPath);
  assert.equal(native.exitCode, 0, String(native.all));
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    postprocess: { engine: string };
  };
  assert.equal(manifest.postprocess.engine, 'native');

  await chown(join(dir, layout.perfData), 65534, 65534);
  const owner = await runCli(['postprocess', '--dir', dir]);
  assert.equal(owner.exitCode, 1);
  assert.match(String(owner.stderr), /belongs to uid 65534[\s\S]*fix: .*chown/);
  const forced = await runCli(['postprocess', '--dir', dir, '--force', '-q']);
  assert.equal(forced.exitCode, 0, String(forced.all));
});

test('flags map onto the pipeline options', () => {
  assert.deepEqual(
    toOptions({
      keepArgs: true,
      keepModule: false,
      keepTier: true,
      eventFilter: 'cpu-clock',
      weight: 'period',
      title: 'T',
      colors: 'java',
      width: 900,
      perf: '/opt/perf',
      engine: 'native',
      force: false,
      tarball: false,
    }),
    {
      fold: { keepArguments: true, keepModule: false, keepTier: true, eventFilter: 'cpu-clock', weight: 'period' },
      title: 'T',
      svg: { colors: 'java', width: 900 },
      perfPath: '/opt/perf',
      engine: 'native',
      force: false,
      tarball: false,
    },
  );
});

test('`--engine native` post-processes with no perf at all: every output, the workload named, the manifest says so', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const run = await runCli(['postprocess', '--dir', dir, '--engine', 'native', '--perf', '/nonexistent/perf', '-q']);
  assert.equal(run.exitCode, 0, String(run.all));
  for (const name of [layout.perfScript, layout.foldedStacks, layout.flamegraphSvg, layout.manifest, layout.tarball])
    assert.ok((await stat(join(dir, name))).isFile(), name);
  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  for (const name of burnFunctions) assert.ok(folded.includes(name), `${name} in the folded stacks`);
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    postprocess: { engine: string; commands: string[][] };
  };
  assert.equal(manifest.postprocess.engine, 'native');
  assert.deepEqual(manifest.postprocess.commands, []);
});

test('the manifest of the built CLI, whose hashes are taken as the outputs are written, holds each file as it is', async (t) => {
  const dir = await folder(t);
  if (!dir) return;
  const run = await runCli(['postprocess', '--dir', dir, '-q']);
  assert.equal(run.exitCode, 0, String(run.all));
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    files: { path: string; bytes: number; sha256: string }[];
  };
  const paths = manifest.files.map((file) => file.path);
  for (const name of [layout.perfData, layout.perfScript, layout.foldedStacks, layout.speedscope])
    assert.ok(paths.includes(name), name);
  for (const file of manifest.files) {
    const content: Buffer = await readFile(join(dir, file.path));
    assert.equal(file.bytes, content.length, file.path);
    assert.equal(file.sha256, createHash('sha256').update(content).digest('hex'), file.path);
  }
});

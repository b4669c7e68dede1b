// The npx case of issue #13, for real: the built package packed by `npm pack` (what `files` in package.json ships),
// installed from that .tgz into a fresh prefix, and `npx profcpu postprocess prof.tar.gz` run on a recording's tarball
// with a PATH holding node, npm, npx and sh only (no perf). Outputs must be written, the workload named, and the
// built-in engine (the default) used; `--engine perf` fails with the remedy naming it.
// Takes 20-40 s (npm pack, npm install from npm's cache, two post-processings); the dependencies come from the cache
// `npm ci` filled (--prefer-offline), else from the registry.
import { execa } from 'execa';
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, cp } from 'node:fs/promises';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { repoRoot, runCli } from '../support/cli.js';
import { canRecord, have, isRoot, need } from '../support/requirements.js';
import { burnFunctions, keepPerfMap, recordNode } from '../postprocess/recording.js';

let root: string | undefined;
after(() => (root ? rm(root, { recursive: true, force: true }) : undefined));

/** A folder of links to node, npm, npx and sh: a PATH with Node and no perf. */
async function nodeOnlyPath(dir: string): Promise<string> {
  await mkdir(dir);
  const find = async (command: string) => (await execa('sh', ['-c', `command -v ${command}`])).stdout.trim();
  await symlink(process.execPath, join(dir, 'node'));
  for (const command of ['npm', 'npx', 'sh']) await symlink(await find(command), join(dir, command));
  return dir;
}

test('npx profcpu postprocess prof.tar.gz on a machine with Node and no perf', { timeout: 300_000 }, async (t) => {
  if (!canRecord(t) || !need(t, have('npm') && have('npx'), 'npm and npx')) return;
  assert.ok(isRoot());
  root = await mkdtemp('/var/tmp/profcpu-npx-');

  // A recording's tarball, as somebody would send it.
  const recorded = join(root, '15-02-11_2026-11-22');
  await keepPerfMap(recorded, await recordNode(recorded));
  const made = await runCli(['postprocess', recorded, '-q']);
  assert.equal(made.exitCode, 0, String(made.all));
  const received = join(root, 'received');
  await mkdir(received);
  await cp(join(recorded, layout.tarball), join(received, layout.tarball));

  // The package as npm would publish it, installed from its .tgz.
  const packed = await execa('npm', ['pack', '--pack-destination', root, '--json'], { cwd: repoRoot });
  const [{ filename, files }] = JSON.parse(packed.stdout) as [{ filename: string; files: { path: string }[] }];
  const shipped = new Set(files.map((f) => f.path));
  for (const path of [
    'dist/cli/main.js',
    'dist/output/unpack.js',
    'assets/viewer.js',
    'src/collect/dotnet-demo/Program.cs',
    'package.json',
  ])
    assert.ok(shipped.has(path), `the package lacks ${path}`);
  const env = {
    PATH: await nodeOnlyPath(join(root, 'bin')),
    npm_config_yes: 'true',
    npm_config_update_notifier: 'false',
  };
  await assert.rejects(execa('sh', ['-c', 'command -v perf'], { env, extendEnv: false }), 'perf is still on PATH');
  const prefix = join(root, 'prefix');
  const install = await execa(
    'npm',
    ['install', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', '--no-save', join(root, filename)],
    { env: { ...process.env, ...env }, reject: false, all: true },
  );
  assert.equal(install.exitCode, 0, String(install.all));

  const npx = (args: readonly string[]) =>
    execa('npx', ['--prefix', prefix, '--offline', 'profcpu', 'postprocess', ...args], {
      cwd: received,
      env: { ...process.env, ...env },
      reject: false,
      all: true,
      timeout: 120_000,
    });
  // No --engine: the built-in engine, the default, needs no perf.
  const run = await npx([layout.tarball]);
  assert.equal(run.exitCode, 0, String(run.all));
  const unpacked = join(received, '15-02-11_2026-11-22');
  assert.match(String(run.stderr), /unpacked prof\.tar\.gz into /);
  for (const name of [layout.flamegraphSvg, layout.flamegraphHtml, layout.speedscope, layout.manifest])
    assert.ok((await readdir(unpacked, { recursive: true })).includes(name), `${name} was not written`);
  const folded = await readFile(join(unpacked, layout.foldedStacks), 'utf8');
  assert.equal(folded, await readFile(join(recorded, layout.foldedStacks), 'utf8'));
  for (const name of burnFunctions) assert.match(folded, new RegExp(name));

  // --engine perf asks for perf, which is not there: the error says how to do without it.
  const perf = await npx([layout.tarball, '--out', join(root, 'chosen'), '--engine', 'perf', '-q']);
  assert.equal(perf.exitCode, 1, String(perf.all));
  assert.match(String(perf.stderr), /perf was not found[\s\S]*--engine native/);
});

import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { craftTarGz } from '../support/crafted-tar.js';
import { tempDir } from '../support/temp.js';

const beforeText = 'app;main;grow 10\napp;main;shrink 30\napp;main;same 60\n';
const afterText = 'app;main;grow 40\napp;main;shrink 10\napp;main;same 50\n';

/** BEFORE as a folder, AFTER as a tarball (perf.data and the folded stacks under one top folder) and as a file. */
async function inputs(dir: string) {
  const folder = join(dir, 'before');
  await mkdir(folder);
  await writeFile(join(folder, layout.foldedStacks), beforeText);
  const tarball = join(dir, 'after.tar.gz');
  await writeFile(
    tarball,
    craftTarGz([
      { path: 'run/', type: 'Directory' },
      { path: 'run/perf.data', body: 'PERFILE2' },
      { path: `run/${layout.foldedStacks}`, body: afterText },
    ]),
  );
  const file = join(dir, 'after.folded');
  await writeFile(file, afterText);
  return { folder, tarball, file };
}

test('a folder against a tarball and against a file: the same comparison, table and files', async (t) => {
  const dir = await tempDir(t, 'diff-cli');
  const { folder, tarball, file } = await inputs(dir);
  const results = [];
  for (const after of [tarball, file]) {
    const out = join(dir, `out-${results.length}`);
    const run = await runCli(['diff', folder, after, '-o', out]);
    assert.equal(run.exitCode, 0, run.all);
    assert.deepEqual((await readdir(out)).sort(), ['diff.html', 'diff.json', 'diff.svg']);
    const json = JSON.parse(await readFile(join(out, 'diff.json'), 'utf8'));
    results.push(json.frames);
    assert.match(run.stdout as string, /frames whose share moved most \(3 of 3\)/);
    assert.match(run.stdout as string, /\s10\.00%\s+40\.00%\s+\+30\.00\s.*grow$/m);
    assert.match(run.stdout as string, /\s30\.00%\s+10\.00%\s+−20\.00\s.*shrink$/m);
  }
  assert.deepEqual(results[0], results[1]);
});

test('--fail-above: exit 4 naming the frame that grew past it, 0 under it', async (t) => {
  const dir = await tempDir(t, 'diff-gate');
  const { folder, file } = await inputs(dir);
  const gate = (...flags: string[]) => runCli(['diff', folder, file, '-o', join(dir, 'o'), ...flags]);
  const failing = await gate('--fail-above', '20', '-q');
  assert.equal(failing.exitCode, 4, failing.all);
  assert.equal(failing.stdout, '');
  assert.match(failing.stderr as string, /grow grew by 30\.00 points \(10\.00% → 40\.00%\), more than --fail-above 20/);
  const passing = await gate('--fail-above', '30');
  assert.equal(passing.exitCode, 0, passing.all);
  // Only the frames --fail-only matches count: `grow` grew 30 points, `main` and `app` none.
  const onlyMain = await gate('--fail-above', '5', '--fail-only', '^(main|app)$');
  assert.equal(onlyMain.exitCode, 0, onlyMain.all);
  const onlyGrow = await gate('--fail-above', '5', '--fail-only', 'gro');
  assert.equal(onlyGrow.exitCode, 4, onlyGrow.all);
  const badPattern = await runCli(['diff', folder, file, '--fail-above', '5', '--fail-only', '(']);
  assert.equal(badPattern.exitCode, 2);
  const alone = await runCli(['diff', folder, file, '--fail-only', 'x']);
  assert.equal(alone.exitCode, 2);
  assert.match(alone.stderr as string, /--fail-only goes with --fail-above/);
  const raw = await gate('--raw');
  assert.match(raw.stdout as string, /weights compared as they are/);
});

test('bad inputs fail with a remedy; the off-CPU view of a folder without one says how to get it', async (t) => {
  const dir = await tempDir(t, 'diff-bad');
  const { folder, file } = await inputs(dir);
  const missing = await runCli(['diff', join(dir, 'nope'), file]);
  assert.equal(missing.exitCode, 1);
  assert.match(missing.stderr as string, /cannot read .*nope.*\n {2}fix: /);
  const offcpu = await runCli(['diff', folder, folder, '--view', 'offcpu', '-o', join(dir, 'o')]);
  assert.equal(offcpu.exitCode, 1);
  assert.match(offcpu.stderr as string, /collect --off-cpu/);
  await writeFile(join(dir, 'empty.folded'), 'no stacks here\n');
  const empty = await runCli(['diff', join(dir, 'empty.folded'), file, '-o', join(dir, 'o')]);
  assert.equal(empty.exitCode, 1);
  assert.match(empty.stderr as string, /no stack with a positive count/);
  const usage = await runCli(['diff', folder, file, '--fail-above', '-3']);
  assert.equal(usage.exitCode, 2);
  const one = await runCli(['diff', folder]);
  assert.equal(one.exitCode, 2);
});

test('a hostile tarball (its folded stacks a link out) is refused; hostile names print escaped', async (t) => {
  const dir = await tempDir(t, 'diff-hostile');
  const { folder, file } = await inputs(dir);
  const linked = join(dir, 'linked.tar.gz');
  await writeFile(
    linked,
    craftTarGz([
      { path: 'run/', type: 'Directory' },
      { path: 'run/perf.data', body: 'PERFILE2' },
      { path: `run/${layout.foldedStacks}`, type: 'SymbolicLink', linkpath: '/etc/passwd' },
    ]),
  );
  const refused = await runCli(['diff', folder, linked, '-o', join(dir, 'o')]);
  assert.equal(refused.exitCode, 1, refused.all);
  assert.match(refused.stderr as string, /link/);
  await writeFile(join(dir, 'evil.folded'), 'app;main;\u001b[31mred\u202e\u0007 40\n');
  const evil = await runCli(['diff', file, join(dir, 'evil.folded'), '-o', join(dir, 'o')]);
  assert.equal(evil.exitCode, 0, evil.all);
  assert.ok(!(evil.stdout as string).includes('\u001b'), 'no escape sequence reaches the terminal');
  assert.match(evil.stdout as string, /\\x1b\[31mred\\u202e\\x07/);
});

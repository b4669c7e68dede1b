// `profcpu collect` end to end on this machine: a real Node target with distinctive function names, real perf.
import assert from 'node:assert/strict';
import { access, readFile, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { list } from 'tar';
import { layout } from '../../src/output/layout.js';
import { cliPath, runCli } from '../support/cli.js';
import { canRecord, have, need, needRoot } from '../support/requirements.js';
import { nonexistentPid } from '../support/processes.js';
import { namesWorkload, startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { execa } from 'execa';
import { tempDir } from '../support/temp.js';

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

interface CollectManifest {
  files: { path: string }[];
  collect: { record: { end: string; samples: number }; phaseMs: Record<string, number>; cpuMs: { profcpu: number } };
}

test('collect with the original tool’s single-dash options names the JIT frames, and writes a complete tarball and manifest', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'collect', '/var/tmp');
  const target = await startNodeBurn(60);
  t.after(() => target.kill());
  const dir = join(work, 'out');
  const run = await runCli(['collect', '-pid', String(target.pid), '-duration', '2', '-output', dir], { cwd: work });
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), new RegExp(`profiling process ${target.pid} .*PID ${target.pid} was given`));
  assert.match(String(run.stdout), /flame graph .*flamegraph\.svg/);
  assert.match(String(run.stdout), /tarball .*prof\.tar\.gz/);
  assert.match(String(run.stdout), /named +\d+\.\d% of samples/);

  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  assert.ok(namesWorkload(folded), `folded stacks name the workload:\n${folded}`);
  assert.ok(namesWorkload(await readFile(join(dir, layout.flamegraphSvg), 'utf8')), 'the SVG names the workload');

  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as CollectManifest;
  const inManifest = manifest.files.map((f) => f.path);
  const expected = [
    layout.perfData,
    layout.perfMap(target.pid),
    layout.procMaps,
    layout.targetInfo,
    layout.foldedStacks,
    layout.flamegraphSvg,
    layout.perfScript,
  ];
  for (const file of expected) assert.ok(inManifest.includes(file), `${file} in the manifest`);
  assert.equal(manifest.collect.record.end, 'duration');
  assert.ok(manifest.collect.record.samples > 0);
  assert.ok(manifest.collect.phaseMs['recording']! >= 2000);

  const entries: string[] = [];
  await list({ file: join(dir, layout.tarball), onReadEntry: (e) => entries.push(e.path) });
  for (const file of [...expected, layout.manifest])
    assert.ok(entries.includes(`out/${file}`), `${file} in the tarball`);
});

test('Ctrl-C (to the process group, as a terminal sends it) stops the recording and still post-processes it', async (t) => {
  if (!canRecord(t)) return;
  const { dir, collect } = await startLongCollect(t);
  // Past perf's start (it reads the target's mappings first, slowly on a busy machine).
  await sleep(3000);
  ctrlC(collect);
  const run = await collect;
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stdout), /stopped early/);
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as CollectManifest;
  assert.equal(manifest.collect.record.end, 'stopped');
  assert.ok(namesWorkload(await readFile(join(dir, layout.foldedStacks), 'utf8')));
});

test('SIGTERM to profcpu alone (docker stop, kill) also stops the recording and post-processes it', async (t) => {
  if (!canRecord(t)) return;
  const { dir, collect } = await startLongCollect(t);
  await sleep(3000);
  // One SIGTERM, as docker stop sends it (execa's own kill() would add a SIGKILL 5 s later, before a loaded machine
  // has post-processed: seen as an exit by signal).
  process.kill(collect.pid!, 'SIGTERM');
  const run = await collect;
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), /SIGTERM: stopping the recording/);
  assert.ok(namesWorkload(await readFile(join(dir, layout.foldedStacks), 'utf8')));
});

test('a second Ctrl-C aborts post-processing and leaves the raw data', async (t) => {
  if (!canRecord(t)) return;
  const { dir, collect } = await startLongCollect(t);
  await sleep(1000);
  ctrlC(collect);
  await waitForOutput(collect, /stopping the recording/);
  ctrlC(collect);
  const run = await collect;
  assert.equal(run.exitCode, 130, String(run.all));
  assert.match(String(run.stderr), /aborting; the raw data already written is kept/);
  assert.ok((await stat(join(dir, layout.perfData))).size > 0, 'perf.data is kept');
  assert.ok(await exists(join(dir, layout.targetInfo)), 'target.json is kept');
  assert.equal(await exists(join(dir, layout.tarball)), false, 'no tarball');
});

test('a target that exits mid-recording still yields a named profile', async (t) => {
  if (!canRecord(t)) return;
  const { dir, collect, target } = await startLongCollect(t, 30);
  // The target ends itself (SIGTERM: a clean exit) a few seconds into the recording.
  await sleep(3000);
  target.child.kill('SIGTERM');
  const run = await collect;
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stdout), /the target exited/);
  assert.ok((await stat(join(dir, layout.perfMap(target.pid)))).size > 0);
  assert.ok(namesWorkload(await readFile(join(dir, layout.foldedStacks), 'utf8')));
  // With the target gone and its map removed, the names can only come from the snapshot taken while it ran.
  await target.exited;
  await rm(`/tmp/perf-${target.pid}.map`, { force: true });
  const again = await runCli(['postprocess', '--dir', dir]);
  assert.equal(again.exitCode, 0, String(again.all));
  assert.ok(namesWorkload(await readFile(join(dir, layout.foldedStacks), 'utf8')));
});

test('--no-postprocess leaves only the raw data, which postprocess can finish later', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'collect', '/var/tmp');
  const target = await startNodeBurn(60);
  t.after(() => target.kill());
  const dir = join(work, 'out');
  const run = await runCli([
    'collect',
    '--pid',
    String(target.pid),
    '--duration',
    '1',
    '--no-postprocess',
    '--output',
    dir,
  ]);
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stdout), /not post-processed: run `profcpu postprocess --dir/);
  assert.ok(await exists(join(dir, layout.perfData)));
  assert.ok(await exists(join(dir, layout.perfMap(target.pid))));
  assert.equal(await exists(join(dir, layout.flamegraphSvg)), false);
});

test('--help: --symbols fetches for what perf sampled by default, and says so', async () => {
  const help = await runCli(['collect', '--help']);
  assert.equal(help.exitCode, 0, String(help.all));
  const text = String(help.stdout).replace(/\s+/g, ' ');
  assert.match(text, /--symbols Fetch debug files by build-id after recording, for what lacks symbols: sampled:/);
  assert.match(text, /every native library perf sampled \(libc, libstdc\+\+, libclrjit\.\.\.; 32 at most\)/);
  assert.match(text, /\[choices: "sampled", "coreclr", "all", "none"\] \[default: "sampled"\]/);
});

test('--stack-size with --unwind fp, or out of range, is a usage error (exit 2) saying what to give', async () => {
  const alone = await runCli(['collect', '--pid', '1', '--unwind', 'fp', '--stack-size', '4096']);
  assert.equal(alone.exitCode, 2, String(alone.all));
  assert.match(String(alone.stderr), /--stack-size sizes the stack copies of mixed unwinding, not --unwind fp/);
  const big = await runCli(['collect', '--pid', '1', '--unwind', 'mixed', '-stack-size', '70000']);
  assert.equal(big.exitCode, 2, String(big.all));
  assert.match(String(big.stderr), /--stack-size must be a whole number of bytes from 8 to 65528/);
});

test('--switch-stack-size or --switch-share without --off-cpu, or out of range, is a usage error (exit 2)', async () => {
  const cases: [string[], RegExp][] = [
    [['--switch-stack-size', '16384'], /--switch-stack-size goes with --off-cpu/],
    [['--off-cpu', '--unwind', 'fp', '--switch-stack-size', '16384'], /sizes the stack copies of mixed unwinding/],
    [
      ['--off-cpu', '--switch-stack-size', '70000'],
      /--switch-stack-size must be a whole number of bytes from 8 to 65528/,
    ],
    [['--switch-share', '25'], /--switch-share goes with --off-cpu/],
    [['--off-cpu', '--switch-share', '0'], /--switch-share must be auto or a percentage from 1 to 100/],
    [['--off-cpu', '--switch-share', 'half'], /--switch-share must be auto or a percentage from 1 to 100/],
  ];
  for (const [flags, message] of cases) {
    const run = await runCli(['collect', '--pid', '1', ...flags]);
    assert.equal(run.exitCode, 2, String(run.stderr));
    assert.match(String(run.stderr), message);
  }
});

test('--min-block without --off-cpu, or not a time, is a usage error (exit 2) saying what to give', async () => {
  const alone = await runCli(['collect', '--pid', '1', '--min-block', '1ms']);
  assert.equal(alone.exitCode, 2, String(alone.all));
  assert.match(String(alone.stderr), /--min-block goes with --off-cpu/);
  const bad = await runCli(['collect', '--pid', '1', '-off-cpu', '-min-block', 'soon']);
  assert.equal(bad.exitCode, 2, String(bad.all));
  assert.match(String(bad.stderr), /--min-block "soon" is not a time \(500us, 1ms, 0\.5s\)/);
});

test('a PID that does not exist fails with a remedy', async () => {
  const gone = nonexistentPid();
  const run = await runCli(['collect', '--pid', String(gone), '--duration', '1', '--output', '/var/tmp/profcpu-never']);
  assert.equal(run.exitCode, 1, String(run.all));
  assert.match(String(run.stderr), new RegExp(`error: no process ${gone} is visible here`));
  assert.match(String(run.stderr), /fix: Check the PID with `profcpu ps`/);
  assert.equal(await exists('/var/tmp/profcpu-never'), false, 'nothing written');
});

test('a process that is not visible to the user profcpu runs as fails with a remedy', async (t) => {
  if (!needRoot(t) || !need(t, have('setpriv'), '`setpriv` (Debian package util-linux)')) return;
  const target = await startNodeBurn(60, { perfMap: false });
  t.after(() => target.kill());
  // As nobody, without capabilities, a root process's environ and maps cannot be read.
  const run = await execa(
    'setpriv',
    [
      '--reuid=65534',
      '--regid=65534',
      '--clear-groups',
      '--inh-caps=-all',
      process.execPath,
      cliPath,
      'collect',
      '--pid',
      String(target.pid),
      '--duration',
      '1',
      '--output',
      '/var/tmp/profcpu-never',
    ],
    { reject: false, all: true, cwd: '/' },
  );
  assert.equal(run.exitCode, 1, String(run.all));
  assert.match(String(run.stderr), new RegExp(`process ${target.pid} exists but its /proc entries cannot be read`));
  assert.match(String(run.stderr), /fix: Run profcpu as root/);
});

/**
 * A long collect (60 s unless said) of a burning Node target, in a process group of its own (so Ctrl-C can be sent
 * as a terminal does: to profcpu and perf alike), once it says it is recording.
 */
async function startLongCollect(t: TestContext, seconds = 60) {
  const work = await tempDir(t, 'collect', '/var/tmp');
  const target = await startNodeBurn(60);
  t.after(() => target.kill());
  const dir = join(work, 'out');
  const collect = execa(
    process.execPath,
    [cliPath, 'collect', '--pid', String(target.pid), '--duration', String(seconds), '--output', dir],
    { cwd: work, reject: false, all: true, detached: true },
  );
  t.after(() => killGroup(collect));
  await waitForOutput(collect, new RegExp(`recording for ${seconds} s`));
  return { dir, collect, target };
}

async function waitForOutput(subprocess: ReturnType<typeof execa>, pattern: RegExp): Promise<void> {
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString();
      if (pattern.test(seen)) {
        subprocess.stderr?.off('data', onData);
        resolve();
      }
    };
    subprocess.stderr?.on('data', onData);
    void subprocess.then(() => reject(new Error(`exited before printing ${pattern}: ${seen}`)));
  });
}

/** What a terminal's Ctrl-C does: SIGINT to every process of the foreground process group. */
function ctrlC(subprocess: ReturnType<typeof execa>): void {
  process.kill(-subprocess.pid!, 'SIGINT');
}

/** Ends whatever is left of the group (profcpu and its perf) after a failed test. */
function killGroup(subprocess: ReturnType<typeof execa>): void {
  try {
    process.kill(-subprocess.pid!, 'SIGKILL');
  } catch {
    // The group is already gone.
  }
}

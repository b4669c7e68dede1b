// `profcpu dump` against a hostile target (test/dump/fake-runtime.mjs as PID 1 of its namespaces, reached from a
// sidecar): what the "runtime" leaves in place of the dump is a link out of its root, a FIFO, a sparse 1 TiB file, a
// hard link, or a file that keeps growing; or it refuses, knows no dump command, or never answers. Each run must end
// under a deadline with a clear error, copy nothing of the sidecar's, leave no dump or partial file in the output
// folder and nothing under the dump's name in the target. A Ctrl-C during a copy leaves no partial file either; one
// while the runtime writes (it creates the file only at the end, as createdump) waits for it and removes the file, and a
// second leaves at once, naming the file the runtime then writes. Two dumps into one folder at once both stay listed.
import assert from 'node:assert/strict';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { execa } from 'execa';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { DumpManifest } from '../../src/dump/dump-manifest.js';
import { cliPath, repoRoot } from '../support/cli.js';
import { hostileScene, inSidecar, scanForMarker, startHostileTarget, type HostileScene } from '../support/hostile.js';
import type { NamespacedTarget } from '../support/namespaces.js';
import { needCommand, needRoot } from '../support/requirements.js';

const fakeRuntime = join(repoRoot, 'test/dump/fake-runtime.mjs');

function prerequisites(t: TestContext): boolean {
  return needRoot(t) && needCommand(t, 'unshare', 'util-linux') && needCommand(t, 'nsenter', 'util-linux');
}

async function fakeTarget(t: TestContext, scene: HostileScene, mode: string): Promise<NamespacedTarget> {
  return startHostileTarget(t, scene, ':', {
    exec: `exec "${process.execPath}" '${fakeRuntime}' ${mode} '${scene.secret}'`,
    ready: async ({ hostPid }) =>
      (await readdir(`/proc/${hostPid}/root/tmp`).catch(() => [] as string[])).some((n) =>
        n.startsWith('dotnet-diagnostic-1-'),
      ),
  });
}

/**
 * What is left where nothing may be: the output folder (a failed dump leaves none, not even empty), the dump's name
 * in the target.
 */
async function leftovers(scene: HostileScene, target: NamespacedTarget) {
  const inTarget = await readdir(`/proc/${target.hostPid}/root/tmp`);
  return {
    output: await readdir(scene.out).catch((error: NodeJS.ErrnoException) => error.code),
    target: inTarget.filter((n) => n.startsWith('profcpu-dump-')),
  };
}

async function dumpFails(t: TestContext, mode: string, expected: RegExp, extra: readonly string[] = []) {
  const scene = await hostileScene(t);
  const target = await fakeTarget(t, scene, mode);
  const run = await inSidecar(
    target,
    scene,
    [process.execPath, cliPath, 'dump', '--pid', '1', '--output', scene.out, ...extra],
    { timeout: 60_000 },
  );
  const output = String(run.all);
  assert.equal(run.exitCode, 1, output);
  assert.match(output, expected);
  assert.doesNotMatch(output, /internal error/);
  assert.deepEqual(await leftovers(scene, target), { output: 'ENOENT', target: [] }, output);
  assert.deepEqual((await scanForMarker(scene.dir, scene.marker)).hits, ['secret'], 'only the secret holds the marker');
  return { scene, target, output };
}

test('the dump is a link out of the target’s root: refused, never followed', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'symlink', /is a symbolic link, not a regular file/);
});

test('the dump is a FIFO: refused without opening it (no hang)', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'fifo', /is a FIFO, not a regular file/);
});

test('the dump is a sparse 1 TiB file: over the size cap, refused before a byte is copied', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'sparse', /is 1048576\.0 MiB, more than the 65536\.0 MiB allowed/);
});

test('the dump is a sparse 1 TiB file under a raised cap: more than the output’s free space, refused', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'sparse', /no room for the dump in .*: it is 1048576\.0 MiB, the file system there has/, [
    '--max-size',
    String(4 * 1024 * 1024),
  ]);
});

test('the dump is a hard link to another file of the target: refused', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'hardlink', /is a file with 2 hard links, not a fresh file/);
});

test('the dump keeps growing while it is copied: refused, nothing kept', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'growing', /changed while it was copied/);
});

test('the runtime refuses the dump: its own words are shown', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'refuse', /did not write the dump: Insufficient space to write the dump \(0x80004005\)/);
});

test('a runtime without dump commands (before .NET 5): each version tried, then a clear error', async (t) => {
  if (!prerequisites(t)) return;
  const { target, output } = await dumpFails(t, 'old', /does not know GenerateCoreDump\b.*\n.*\.NET 5 or later/);
  const requests = await readFile(`/proc/${target.hostPid}/root/tmp/requests`, 'utf8');
  assert.deepEqual(requests.trim().split('\n'), ['1.3', '1.2', '1.1'], output);
});

test('a runtime that never answers: the --timeout ends the wait', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFails(t, 'silent', /no complete diagnostic IPC reply .* within 2000 ms/, ['--timeout', '2']);
});

/** The pid of the CLI among `root`'s descendants (the sidecar's wrappers do not pass signals on). */
async function cliProcess(root: number): Promise<number | undefined> {
  const pending = [root];
  for (let seen = 0; pending.length > 0 && seen < 64; seen++) {
    const pid = pending.shift()!;
    const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
    // The node running the CLI itself, not a wrapper shell that has its path among its arguments.
    if (cmdline.split('\0')[1] === cliPath) return pid;
    const tasks = await readdir(`/proc/${pid}/task`).catch(() => [] as string[]);
    for (const task of tasks) {
      const children = await readFile(`/proc/${pid}/task/${task}/children`, 'utf8').catch(() => '');
      pending.push(...children.trim().split(/\s+/).filter(Boolean).map(Number));
    }
  }
  return undefined;
}

/** A dump run in the sidecar whose output is gathered as it comes, to act on a line once it appears. */
function watchedDump(target: NamespacedTarget, scene: HostileScene, extra: readonly string[] = [], setup?: string) {
  const argv = [process.execPath, cliPath, 'dump', '--pid', '1', '--output', scene.out, ...extra];
  const run = inSidecar(target, scene, argv, { timeout: 60_000, ...(setup && { setup }) });
  let text = '';
  run.all?.on('data', (chunk: Buffer) => (text += chunk.toString()));
  return {
    run,
    /** Resolves with the first match of `pattern` in the output so far (60 s at most). */
    async seen(pattern: RegExp): Promise<RegExpMatchArray> {
      for (let i = 0; i < 1200; i++) {
        const match = pattern.exec(text);
        if (match) return match;
        await sleep(50);
      }
      assert.fail(`no ${pattern} in:\n${text}`);
    },
  };
}

const runtimeWriting = /the runtime is writing a full dump to (\S+) in the target/;
const waitingForRuntime =
  /waiting for the runtime to finish so its file can be removed; Ctrl-C again to leave it at (\S+)/;

test('Ctrl-C while the runtime writes: profcpu waits for it, then removes the file it wrote', async (t) => {
  if (!prerequisites(t)) return;
  const scene = await hostileScene(t);
  const target = await fakeTarget(t, scene, 'late');
  const dump = watchedDump(target, scene);
  const [, path] = await dump.seen(runtimeWriting);
  process.kill((await cliProcess(dump.run.pid!))!, 'SIGINT');
  assert.equal((await dump.seen(waitingForRuntime))[1], path);
  // Only now does the "runtime" create the file, as createdump does at its end.
  await writeFile(`/proc/${target.hostPid}/root/tmp/go`, '');
  const result = await dump.run;
  const output = String(result.all);
  assert.equal(result.exitCode, 130, output);
  assert.equal(await readFile(`/proc/${target.hostPid}/root/tmp/written`, 'utf8'), `${path}\n`, 'the file was written');
  assert.deepEqual(await leftovers(scene, target), { output: 'ENOENT', target: [] }, output);
  assert.doesNotMatch(output, /may still be writing/);
});

test('Ctrl-C twice while the runtime writes: profcpu leaves at once, saying where the file will be', async (t) => {
  if (!prerequisites(t)) return;
  const scene = await hostileScene(t);
  const target = await fakeTarget(t, scene, 'late');
  const dump = watchedDump(target, scene);
  const [, path] = await dump.seen(runtimeWriting);
  const cli = (await cliProcess(dump.run.pid!))!;
  process.kill(cli, 'SIGINT');
  await dump.seen(waitingForRuntime);
  process.kill(cli, 'SIGINT');
  const result = await dump.run;
  const output = String(result.all);
  assert.equal(result.exitCode, 130, output);
  assert.ok(output.includes(`the runtime may still be writing ${path} in the target: remove it`), output);
  // The warning is true: the runtime, let go on, puts its file there.
  await writeFile(`/proc/${target.hostPid}/root/tmp/go`, '');
  const written = `/proc/${target.hostPid}/root/tmp/written`;
  for (let i = 0; i < 600 && !(await readFile(written, 'utf8').catch(() => '')); i++) await sleep(50);
  assert.deepEqual(await leftovers(scene, target), { output: 'ENOENT', target: [path!.split('/').pop()] }, output);
});

test('Ctrl-C while the dump is copied: it stops, and no partial file is left or claimed complete', async (t) => {
  if (!prerequisites(t)) return;
  const scene = await hostileScene(t);
  // A 16 GiB dump, all holes (under the 64 GiB cap), into a tmpfs roomy enough for it: its copy hashes 16 GiB, far
  // longer than the Ctrl-C takes to arrive, whatever the disk, and writes nothing.
  const volume = join(scene.dir, 'volume');
  await mkdir(volume);
  await execa('mount', ['-t', 'tmpfs', '-o', 'size=32g,mode=0700', 'tmpfs', volume]);
  try {
    const out = join(volume, 'out');
    const target = await fakeTarget(t, scene, 'sparse16g');
    const dump = watchedDump(target, { ...scene, out });
    await dump.seen(/copying the dump/);
    process.kill((await cliProcess(dump.run.pid!))!, 'SIGINT');
    const result = await dump.run;
    const output = String(result.all);
    assert.equal(result.exitCode, 130, output);
    assert.match(output, /SIGINT: stopping; no partial dump is kept/);
    assert.deepEqual(await leftovers({ ...scene, out }, target), { output: 'ENOENT', target: [] }, output);
  } finally {
    await execa('umount', [volume]);
  }
});

test('two dumps into one folder at once: each keeps its file and its entry', async (t) => {
  if (!prerequisites(t)) return;
  const scene = await hostileScene(t);
  const target = await fakeTarget(t, scene, 'plain');
  const argv = [process.execPath, cliPath, 'dump', '--pid', '1', '--output', scene.out];
  const runs = await Promise.all([0, 1].map(() => inSidecar(target, scene, argv, { timeout: 60_000 })));
  for (const run of runs) assert.equal(run.exitCode, 0, String(run.all));
  const manifest = JSON.parse(await readFile(join(scene.out, 'manifest.json'), 'utf8')) as DumpManifest;
  assert.deepEqual(manifest.dumps.map((d) => d.file).sort(), ['dump-full-1-1.core', 'dump-full-1-2.core']);
  assert.deepEqual((await readdir(scene.out)).sort(), ['dump-full-1-1.core', 'dump-full-1-2.core', 'manifest.json']);
  for (const dump of manifest.dumps) assert.equal((await readFile(join(scene.out, dump.file))).length, 1 << 20);
});

// A target that serves a FUSE file system and stops answering: it maps a file from it named libcoreclr.so (so
// profcpu takes it for .NET, keeps its binaries and reads the runtime's stubs from it), then never answers a READ,
// or never answers a LOOKUP. A read blocked that way holds its thread for good and keeps a process from exiting, so
// profcpu reads the target in a child it kills (src/collect/target-reader.ts), and perf records without reading the
// file (src/collect/session.ts, avoidStallingFiles). Here the real CLI must exit on its own, warn that the reader was
// stopped and why, and leave a flame graph; what stays blocked in the kernel is freed when the test aborts the
// connection.
import { strict as assert } from 'node:assert';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { execa } from 'execa';
import { cliPath } from '../support/cli.js';
import { ownCgroup } from '../support/cgroup.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { need, needCommand, needRoot } from '../support/requirements.js';

const source = fileURLToPath(new URL('../fixtures/fuse-hang/fuse-hang.c', import.meta.url));

/** The FUSE server and its target, started; cleaned up when the test ends (connection aborted, unmounted). */
async function startHungFuse(
  t: TestContext,
  work: string,
  mode: 'read' | 'lookup' | 'data',
  tmpDir?: string,
  mountsBefore = 0,
  name = 'libcoreclr.so',
) {
  const program = join(work, 'fuse-hang');
  if (!existsSync(program)) execFileSync('gcc', ['-O1', '-Wall', '-o', program, source]);
  const mountpoint = join(work, `mnt-${mode}`);
  await mkdir(mountpoint);
  // Its temp folder in the mount too: where a .NET runtime's diagnostic socket, perf map and dumps would be.
  const server = spawn(program, [mountpoint, name, mode, String(mountsBefore)], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { ...process.env, TMPDIR: tmpDir ?? `${mountpoint}/tmp` },
  });
  // Known once the server says: the cleanup registered first sees them.
  const known: { targetPid?: number; connection?: number } = {};
  t.after(() => {
    // The connection is aborted (every request still waiting gets ENOTCONN), the server and its target die, and with
    // them their mount namespace and the mount.
    if (known.connection !== undefined) abortConnection(known.connection);
    server.kill('SIGKILL');
    if (known.targetPid) process.kill(known.targetPid, 'SIGKILL');
  });
  const targetPid = (known.targetPid = await new Promise<number>((resolve, reject) => {
    let out = '';
    server.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /target (\d+)\n/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    server.on('exit', (code) => reject(new Error(`fuse-hang exited (${code}) before mapping its file`)));
  }));
  // The mount is in the server's namespace only: its connection number is its device's minor, from its mountinfo.
  const mountInfo = await readFile(`/proc/${server.pid}/mountinfo`, 'utf8');
  const line = mountInfo.split('\n').find((l) => l.includes(' - fuse fuse-hang '));
  const connection = Number(/^\S+ \S+ 0:(\d+) /.exec(line ?? '')?.[1]);
  assert.ok(Number.isInteger(connection), `no fuse-hang mount in the server's mountinfo:\n${mountInfo}`);
  known.connection = connection;
  return { targetPid, mountpoint };
}

/** Aborts the FUSE connection with that number (fusectl), mounting fusectl first when it is not. */
function abortConnection(minor: number) {
  const control = '/sys/fs/fuse/connections';
  if (!existsSync(join(control, String(minor))))
    execFileSync('mount', ['-t', 'fusectl', 'fusectl', control], { stdio: 'ignore' });
  execFileSync('sh', ['-c', `echo 1 > ${control}/${minor}/abort`], { stdio: 'ignore' });
}

for (const mode of ['read', 'lookup'] as const) {
  test(`collect exits on its own when the target's FUSE file never answers a ${mode.toUpperCase()}`, async (t) => {
    if (!needRoot(t) || !needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'perf', 'linux-perf')) return;
    if (!need(t, existsSync('/dev/fuse'), '/dev/fuse')) return;
    const work = await mkdtemp(join(tmpdir(), 'profcpu-fuse-'));
    const { targetPid } = await startHungFuse(t, work, mode);
    // After the server's cleanup (hooks run in order): its mount is gone by then.
    t.after(() => rm(work, { recursive: true, force: true }));
    const out = join(work, 'out');
    // The bound: far above the reader's 3 s (perf's own stop bound too), the 2 s recording and postprocess; a hang is
    // what it catches.
    const started = performance.now();
    const run = await execa(
      process.execPath,
      [cliPath, 'collect', '--pid', String(targetPid), '--duration', '2', '--target-timeout', '3', '--output', out],
      { reject: false, all: true, timeout: 120_000, killSignal: 'SIGKILL', cwd: work },
    );
    t.diagnostic(`collect ended after ${((performance.now() - started) / 1000).toFixed(1)} s`);
    assert.equal(run.timedOut, false, `collect hung:\n${run.all}`);
    assert.equal(run.exitCode, 0, run.all);
    // What hung, and what to do about it.
    assert.match(
      run.all,
      /warning: the binaries step did not end within 3 s: the target reader was killed, .*\(fix: the target maps \S+\/libcoreclr\.so \(fuse\)/,
    );
    // perf was kept away from the file, so it recorded: the flame graph is there.
    assert.match(
      run.all,
      /warning: process \d+ maps 1 file\(s\) from a FUSE .*libcoreclr\.so \(fuse\).*without build-ids/,
    );
    // Its diagnostic socket was not looked for in the mount (a LOOKUP there never returns).
    assert.match(run.all, /diagnostic IPC failed \(process \d+'s temp folder \S+\/tmp is on a fuse file system/);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      collect: { record: { samples?: number; command: string[] }; steps: Record<string, Record<string, unknown>> };
    };
    assert.match(String(manifest.collect.steps['binaries']?.['beforeRecordingError']), /did not end within 3 s/);
    assert.ok(manifest.collect.record.command.includes('-B'), manifest.collect.record.command.join(' '));
    assert.ok((manifest.collect.record.samples ?? 0) > 0, `no samples:\n${run.all}`);
    assert.match(await readFile(join(out, 'flamegraph.svg'), 'utf8'), /<svg/);
    // What the killed pass kept before the FUSE file (the target's own executable, mapped first) is indexed, whole.
    const index = JSON.parse(await readFile(join(out, 'target', 'binaries.json'), 'utf8')) as {
      binaries: { path: string; buildId: string }[];
    };
    assert.ok(index.binaries.length > 0, 'nothing kept');
    assert.deepEqual(
      index.binaries.map((b) => b.buildId).sort(),
      (await readdir(join(out, 'target', 'binaries'))).sort(),
    );
  });
}

// A data file on that mount (mapped readable, not executable: an mmapped database, fonts) is no file perf reads: perf
// records with build-ids, nothing waits on the mount, and the default --target-timeout (120 s) is never reached.
// perf reads the build-ids of executable mappings only, but of every mapping when it records stack copies (DWARF call
// graphs sample data addresses): collect's default then records frame-pointer chains, keeping build-ids; asked for
// mixed unwinding, it records without build-ids. Either way it exits on its own.
for (const unwind of ['auto', 'mixed'] as const) {
  test(`collect with --unwind ${unwind} exits on its own when the target maps a data file from a FUSE mount that never answers`, async (t) => {
    if (!needRoot(t) || !needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'perf', 'linux-perf')) return;
    if (!need(t, existsSync('/dev/fuse'), '/dev/fuse')) return;
    const work = await mkdtemp(join(tmpdir(), 'profcpu-fuse-'));
    // Named as no runtime file is (the runtime stubs step reads a mapped libcoreclr.so, data or not).
    const { targetPid } = await startHungFuse(t, work, 'data', undefined, 0, 'app.sqlite');
    t.after(() => rm(work, { recursive: true, force: true }));
    const out = join(work, 'out');
    const run = await execa(
      process.execPath,
      [cliPath, 'collect', '--pid', String(targetPid), '--duration', '2', '--unwind', unwind, '--output', out],
      { reject: false, all: true, timeout: 100_000, killSignal: 'SIGKILL', cwd: work },
    );
    assert.equal(run.timedOut, false, `collect hung:\n${run.all}`);
    assert.equal(run.exitCode, 0, run.all);
    assert.doesNotMatch(run.all, /did not end within/);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      collect: { options: { unwind: string }; record: { samples?: number; end: string; command: string[] } };
    };
    const { command } = manifest.collect.record;
    if (unwind === 'auto') {
      assert.match(
        run.all,
        /unwinding by frame pointer after all: the target maps data files from a FUSE .*app\.sqlite/,
      );
      assert.doesNotMatch(run.all, /without build-ids/);
      assert.equal(manifest.collect.options.unwind, 'fp');
      assert.ok(!command.includes('-B') && command.includes('-g'), command.join(' '));
    } else {
      assert.match(run.all, /app\.sqlite \(fuse[^)]*\); perf records without build-ids/);
      assert.equal(manifest.collect.options.unwind, 'mixed');
      assert.ok(command.includes('-B') && command.includes('dwarf,32768'), command.join(' '));
    }
    assert.equal(manifest.collect.record.end, 'duration');
    assert.ok((manifest.collect.record.samples ?? 0) > 0, `no samples:\n${run.all}`);
    // The target's own executable was sampled and kept, and stays.
    const index = JSON.parse(await readFile(join(out, 'target', 'binaries.json'), 'utf8')) as {
      binaries: { path: string }[];
    };
    assert.ok(
      index.binaries.some((b) => b.path.endsWith('/fuse-hang')),
      JSON.stringify(index),
    );
  });
}

// Recording every CPU for the target's cgroup (perf 6.1's spin workaround, or --scope cgroup), perf reads the
// files of every process it sees: here another process maps the data file that never answers. The target itself is
// clean; collect must still see it, and record frame pointers (auto) or without build-ids (mixed).
for (const unwind of ['auto', 'mixed'] as const) {
  test(`collect --scope cgroup --unwind ${unwind} sees another process's data file on a FUSE mount that never answers`, async (t) => {
    if (!needRoot(t) || !needCommand(t, 'gcc', 'gcc') || !needCommand(t, 'perf', 'linux-perf')) return;
    if (!need(t, existsSync('/dev/fuse'), '/dev/fuse')) return;
    const work = await mkdtemp(join(tmpdir(), 'profcpu-fuse-'));
    const other = await startHungFuse(t, work, 'data', undefined, 0, 'app.sqlite');
    t.after(() => rm(work, { recursive: true, force: true }));
    const target = await startNodeBurn(60);
    t.after(() => target.kill());
    if (!need(t, (await ownCgroup(t, target.pid)) !== undefined, 'cgroup v2 to put the target in')) return;
    const out = join(work, 'out');
    const args = ['--pid', String(target.pid), '--duration', '2', '--scope', 'cgroup', '--unwind', unwind];
    const run = await execa(process.execPath, [cliPath, 'collect', ...args, '--symbols', 'none', '--output', out], {
      reject: false,
      all: true,
      timeout: 100_000,
      killSignal: 'SIGKILL',
      cwd: work,
    });
    await target.kill();
    assert.equal(run.timedOut, false, `collect hung:\n${run.all}`);
    assert.equal(run.exitCode, 0, run.all);
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      collect: { options: { unwind: string }; record: { samples?: number; command: string[] } };
    };
    const { command } = manifest.collect.record;
    const named = new RegExp(`app\\.sqlite \\(fuse[^,)]*, process ${other.targetPid}\\)`);
    assert.match(run.all, named);
    if (unwind === 'auto') {
      assert.match(run.all, /unwinding by frame pointer after all: processes perf records map data files/);
      assert.equal(manifest.collect.options.unwind, 'fp');
      assert.ok(!command.includes('-B') && command.includes('-g'), command.join(' '));
    } else {
      assert.match(run.all, /processes perf records \(every CPU, for the cgroup\) map \d+ file\(s\)/);
      assert.ok(command.includes('-B') && command.includes('dwarf,32768'), command.join(' '));
    }
    assert.ok((manifest.collect.record.samples ?? 0) > 0, `no samples:\n${run.all}`);
  });
}

// Its temp folder named as is, or through a link from a local folder into the mount (which the mountinfo check of
// the literal path misses: the lookup refuses the mount's root before asking anything of it), or so after 4 000
// mounts, whose long lines (1.3 MB) put the FUSE mount's past the 1 MiB profcpu once read of mountinfo (and then
// walked into the mount, and never exited).
for (const named of ['as is', 'through a link', 'through a link, after 4 000 mounts'] as const) {
  test(`dump refuses a target whose temp folder is on a FUSE mount that never answers a LOOKUP (${named})`, async (t) => {
    if (!needRoot(t) || !needCommand(t, 'gcc', 'gcc')) return;
    if (!need(t, existsSync('/dev/fuse'), '/dev/fuse')) return;
    const work = await mkdtemp(join(tmpdir(), 'profcpu-fuse-'));
    const link = join(work, 'tmp-link');
    if (named !== 'as is') await symlink(join(work, 'mnt-lookup', 'tmp'), link);
    const mounts = named === 'as is' || named === 'through a link' ? 0 : 4_000;
    const { targetPid } = await startHungFuse(t, work, 'lookup', named === 'as is' ? undefined : link, mounts);
    t.after(() => rm(work, { recursive: true, force: true }));
    // The socket lookup, the request and the copy out of the temp folder would each wait there for good.
    const output = join(work, 'out');
    const run = await execa(process.execPath, [cliPath, 'dump', '--pid', String(targetPid), '--output', output], {
      reject: false,
      all: true,
      timeout: 60_000,
      killSignal: 'SIGKILL',
      cwd: work,
    });
    assert.equal(run.timedOut, false, `dump hung:\n${run.all}`);
    assert.equal(run.exitCode, 1, run.all);
    assert.match(
      run.all,
      named === 'as is'
        ? /temp folder \S+\/tmp is on a fuse file system/
        : /cannot look into \S+\/tmp-link \(on a fuse file system \(refused: its server may never answer\)\)/,
    );
    assert.equal(existsSync(join(output, 'manifest.json')), false);
  });
}

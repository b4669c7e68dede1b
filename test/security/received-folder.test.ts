// `profcpu postprocess --dir D` on a folder somebody sent: its entries may be links out of it (to /etc/passwd, to a
// folder or files of ours), FIFOs, or a linked perf.data. Whatever D holds, postprocess must read nothing outside D,
// write nothing outside D (nor through a link in it), and end within a deadline: with success, or with an error that
// says what it refused.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { cp, lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { keepPerfMap, recordNode, type Recording } from '../postprocess/recording.js';
import { runCli } from '../support/cli.js';
import { scanForMarker } from '../support/hostile.js';
import { canRecord, have, isRoot } from '../support/requirements.js';

const deadline = { timeout: 60_000 };

let root: string;
/** A folder as collect leaves it (perf.data, target/perf-<pid>.map, target/maps, target/target.json); never changed. */
let recorded: string;
let recording: Recording | undefined;
const marker = `PROFCPU-SECRET-${process.pid}-${Date.now().toString(16)}`;

before(async () => {
  root = await mkdtemp('/var/tmp/profcpu-received-');
  recorded = join(root, 'recorded');
  if (isRoot() && have('perf')) {
    recording = await recordNode(recorded);
    await keepPerfMap(recorded, recording);
  }
});
after(() => rm(root, { recursive: true, force: true }));

interface Case {
  /** The received folder (a fresh copy of the recording). */
  dir: string;
  /** A folder next to it, outside it: what a link in it may point at. */
  outside: string;
  pid: number;
}

let cases = 0;
async function received(t: TestContext): Promise<Case | undefined> {
  if (!canRecord(t) || !recording) return undefined;
  const base = join(root, `case-${++cases}`);
  const dir = join(base, 'received');
  const outside = join(base, 'outside');
  await cp(recorded, dir, { recursive: true });
  await mkdir(outside);
  await writeFile(join(outside, 'secret'), `${marker}:outside\n`);
  return { dir, outside, pid: recording.pid };
}

/** Every file under `dir` (links not followed) with the SHA-256 of its content, or `-> target` for a link. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (folder: string, prefix: string): Promise<void> => {
    for (const name of (await readdir(folder)).sort()) {
      const path = join(folder, name);
      const info = await lstat(path);
      const rel = prefix + name;
      if (info.isSymbolicLink()) out[rel] = `-> ${await readlink(path)}`;
      else if (info.isDirectory()) await walk(path, `${rel}/`);
      else if (info.isFile())
        out[rel] = createHash('sha256')
          .update(await readFile(path))
          .digest('hex');
      else out[rel] = info.isFIFO() ? 'fifo' : 'other';
    }
  };
  await walk(dir, '');
  return out;
}

function postprocess(dir: string) {
  return runCli(['postprocess', '--dir', dir], { cwd: join(dir, '..'), timeout: 40_000 });
}

type Run = Awaited<ReturnType<typeof postprocess>>;

/** Ended in time; a failure must say what it refused. */
function assertEnded(run: Run, refusal: RegExp = /link|FIFO|not a regular file|refus/i): void {
  assert.equal(run.timedOut, false, `postprocess did not end:\n${String(run.all)}`);
  if (run.exitCode !== 0) assert.match(String(run.stderr), refusal, `an unclear failure:\n${String(run.all)}`);
}

/** No output holds the marker (tarball decompressed); `planted` links are the only links in the folder. */
async function assertNoSecret(c: Case, planted: string[], needle = marker): Promise<void> {
  const scan = await scanForMarker(c.dir, needle);
  assert.deepEqual(scan.hits, [], 'a file from outside the folder reached the outputs');
  assert.deepEqual(
    scan.links.map((l) => l.split(' -> ')[0]).sort(),
    [...planted].sort(),
    'postprocess left links of its own',
  );
}

test(
  'target/target.json linked to /etc/passwd and target/maps to a file outside: neither is read',
  deadline,
  async (t) => {
    const c = await received(t);
    if (!c) return;
    await rm(join(c.dir, layout.targetInfo));
    await symlink('/etc/passwd', join(c.dir, layout.targetInfo));
    await writeFile(join(c.outside, 'maps'), `${await readFile(join(c.dir, layout.procMaps), 'utf8')}${marker}\n`);
    await rm(join(c.dir, layout.procMaps));
    await symlink(join(c.outside, 'maps'), join(c.dir, layout.procMaps));
    const run = await postprocess(c.dir);
    assertEnded(run);
    await assertNoSecret(c, [layout.targetInfo, layout.procMaps]);
    const passwd = (await readFile('/etc/passwd', 'utf8')).split('\n')[0]!;
    assert.deepEqual((await scanForMarker(c.dir, passwd)).hits, [], '/etc/passwd reached the outputs');
  },
);

test('partial and final output names linked to files outside: those files are never written', deadline, async (t) => {
  const c = await received(t);
  if (!c) return;
  const names = [
    layout.flamegraphSvg,
    layout.flamegraphHtml,
    layout.speedscope,
    layout.pprof,
    layout.foldedStacks,
    layout.manifest,
    layout.tarball,
    layout.perfScript,
  ];
  await mkdir(join(c.dir, 'flamescope'), { recursive: true });
  const planted: string[] = [];
  for (const [i, name] of names.entries()) {
    for (const [j, link] of [`${name}.partial`, name].entries()) {
      const victim = join(c.outside, `victim-${i}-${j}`);
      await writeFile(victim, `keep me ${i} ${j}\n`);
      await rm(join(c.dir, link), { force: true });
      await symlink(victim, join(c.dir, link));
      planted.push(link);
    }
  }
  const before = await snapshot(c.outside);
  const run = await postprocess(c.dir);
  assertEnded(run);
  assert.deepEqual(await snapshot(c.outside), before, 'a file outside the folder was written through a link');
  if (run.exitCode === 0) {
    // Success means real outputs, not links: each final name is now a regular file.
    for (const name of names) assert.ok((await lstat(join(c.dir, name))).isFile(), `${name} is not a regular file`);
  }
});

test('flamescope/ linked to a folder outside: nothing is written there', deadline, async (t) => {
  const c = await received(t);
  if (!c) return;
  const elsewhere = join(c.outside, 'flamescope');
  await mkdir(elsewhere);
  await rm(join(c.dir, 'flamescope'), { recursive: true, force: true });
  await symlink(elsewhere, join(c.dir, 'flamescope'));
  const before = await snapshot(c.outside);
  const run = await postprocess(c.dir);
  assertEnded(run);
  assert.deepEqual(await snapshot(c.outside), before, 'postprocess wrote into the linked folder');
  assert.deepEqual(await readdir(elsewhere), []);
});

test(
  'target/ linked to a folder outside, holding a perf map and a secret: nothing of it is read',
  deadline,
  async (t) => {
    const c = await received(t);
    if (!c) return;
    const elsewhere = join(c.outside, 'target');
    await cp(join(c.dir, 'target'), elsewhere, { recursive: true });
    // If this map were placed for perf, every JIT frame would be named after the marker.
    await writeFile(join(elsewhere, `perf-${c.pid}.map`), `0 7fffffffffff ${marker}:outside-perf-map\n`);
    await writeFile(join(elsewhere, 'secret'), `${marker}:outside-target\n`);
    await rm(join(c.dir, 'target'), { recursive: true });
    await symlink(elsewhere, join(c.dir, 'target'));
    const before = await snapshot(c.outside);
    const run = await postprocess(c.dir);
    assertEnded(run);
    await assertNoSecret(c, ['target']);
    assert.deepEqual(await snapshot(c.outside), before, 'the linked folder changed');
  },
);

test('FIFOs as target/perf-<pid>.map, target/maps and target/target.json: postprocess ends', deadline, async (t) => {
  const c = await received(t);
  if (!c) return;
  for (const name of [layout.perfMap(c.pid), layout.procMaps, layout.targetInfo]) {
    await rm(join(c.dir, name));
    execFileSync('mkfifo', [join(c.dir, name)]);
  }
  const started = Date.now();
  const run = await postprocess(c.dir);
  assertEnded(run);
  assert.ok(Date.now() - started < 30_000, `postprocess took ${Date.now() - started} ms`);
});

test('a FIFO as perf.data: postprocess ends with a clear error', deadline, async (t) => {
  const c = await received(t);
  if (!c) return;
  await rm(join(c.dir, layout.perfData));
  execFileSync('mkfifo', [join(c.dir, layout.perfData)]);
  const run = await postprocess(c.dir);
  assert.equal(run.timedOut, false, `postprocess did not end:\n${String(run.all)}`);
  assert.notEqual(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), /perf\.data/, String(run.all));
  assert.match(String(run.stderr), /FIFO|not a regular file/i, String(run.all));
});

test('perf.data linked to a recording elsewhere: refused with a clear message', deadline, async (t) => {
  const c = await received(t);
  if (!c) return;
  const elsewhere = join(c.outside, 'perf.data');
  await cp(join(c.dir, layout.perfData), elsewhere);
  await rm(join(c.dir, layout.perfData));
  await symlink(elsewhere, join(c.dir, layout.perfData));
  const before = await snapshot(c.outside);
  const run = await postprocess(c.dir);
  assert.equal(run.timedOut, false, `postprocess did not end:\n${String(run.all)}`);
  assert.notEqual(run.exitCode, 0, `a linked perf.data was read:\n${String(run.all)}`);
  assert.match(String(run.stderr), /perf\.data.*link|link.*perf\.data/i, String(run.all));
  assert.deepEqual(await snapshot(c.outside), before);
});

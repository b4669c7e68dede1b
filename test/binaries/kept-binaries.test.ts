// Keeping the target's binaries in the output folder: only ELF files of the target with a build-id (the one perf
// recorded, when given), within the size limits, never through a link out of the target, and not twice; and the
// build-id view postprocess gives perf script, which finds them there without writing to this machine's cache.
import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { execa } from 'execa';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseBuildIdList } from '../../src/perf/buildid-cache.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { isProfcpuError } from '../../src/error.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { buildIdView } from '../../src/binaries/buildid-view.js';
import { keepBinaries, keptBinariesStep, readKeptIndex, type KeptBinary } from '../../src/binaries/kept-binaries.js';
import type { TargetInfo } from '../../src/target/inspect.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { FakeProc } from '../support/fake-proc.js';
import { tempDir } from '../support/temp.js';

const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';

async function setup(t: import('node:test').TestContext) {
  const proc = await FakeProc.create();
  await proc.add({ pid: 77, nspid: 1, comm: 'app', cmdline: ['app'], maps: '' });
  const root = join(proc.root, '77', 'root');
  await mkdir(join(root, 'lib'), { recursive: true });
  await copyFile(libc, join(root, 'lib', 'libc.so.6'));
  // A link out of the target, to the same library on the host: must never be followed there.
  await symlink(libc, join(root, 'lib', 'escape.so'));
  const out = await mkdtemp(join(tmpdir(), 'profcpu-kept-'));
  const folder = await OutputFolder.open(out);
  const files = await TargetFiles.open(77, { procRoot: proc.root });
  const buildId = (await readElfFile(libc)).buildId!;
  t.after(async () => {
    await files.close();
    await folder.close();
    await proc.dispose();
    await rm(out, { recursive: true, force: true });
  });
  const keep = (wanted: { path: string; buildId?: string }[], options = {}) =>
    keepBinaries(wanted, files, folder, new Map<string, KeptBinary>(), options);
  return { files, out, folder, buildId, keep };
}

test('parseBuildIdList reads perf buildid-list lines', () => {
  assert.deepEqual(parseBuildIdList('4a5a [kernel.kallsyms]\nzz not one\n93ac61ec /usr/lib/libc.so.6\n'), [
    { buildId: '4a5a', path: '[kernel.kallsyms]' },
    { buildId: '93ac61ec', path: '/usr/lib/libc.so.6' },
  ]);
});

test('a library is kept under its build-id once, with an index; pseudo files are left alone', async (t) => {
  const { files, folder, out, buildId } = await setup(t);
  const wanted = [{ buildId: '4a5a9b0a', path: '[kernel.kallsyms]' }, { path: '/lib/libc.so.6' }];
  const kept = new Map<string, KeptBinary>();
  const first = await keepBinaries(wanted, files, folder, kept);
  assert.deepEqual(
    first.map((b) => [b.path, b.status, b.buildId]),
    [['/lib/libc.so.6', 'kept', buildId]],
  );
  // Only what names frames is kept: the symbols read from the copy are the library's own, in fewer bytes on disk.
  const copy = join(out, 'target', 'binaries', buildId);
  const symbols = async (file: string) => (await execa('nm', ['-D', '--defined-only', file])).stdout;
  assert.equal(await symbols(copy), await symbols(libc));
  assert.equal((await stat(copy)).size, (await stat(libc)).size);
  assert.ok(first[0]!.storedBytes! < (await stat(libc)).size / 2, `${first[0]!.storedBytes} bytes stored`);
  assert.deepEqual([...(await readKeptIndex(folder)).keys()], [buildId]);
  const second = await keepBinaries([{ buildId, path: '/lib/libc.so.6' }], files, folder, kept);
  assert.equal(second[0]?.status, 'present');
});

test('limits, a changed build-id, a file without one and a link out of the target are refused', async (t) => {
  const { buildId, keep } = await setup(t);
  const [big] = await keep([{ buildId, path: '/lib/libc.so.6' }], { maxFileBytes: 1000 });
  assert.equal(big?.status, 'skipped');
  assert.match(big?.reason ?? '', /more than the 1000-byte limit/);
  const [changed] = await keep([{ buildId: 'abcdef12', path: '/lib/libc.so.6' }]);
  assert.equal(changed?.status, 'skipped');
  assert.match(changed?.reason ?? '', /build-id is now/);
  // /lib/escape.so -> /usr/lib/x86_64-linux-gnu/libc.so.6, which the fake target does not have.
  const [escape] = await keep([{ buildId, path: '/lib/escape.so' }]);
  assert.equal(escape?.status, 'missing');
  const [climb] = await keep([{ buildId, path: '/lib/../../../../etc/passwd' }]);
  assert.notEqual(climb?.status, 'kept');
});

test("the build-id view gives perf the kept binary and links this machine's entries, writing nothing there", async (t) => {
  const { files, folder, buildId } = await setup(t);
  await keepBinaries([{ path: '/lib/libc.so.6' }], files, folder, new Map());
  const machine = await tempDir(t, 'machine-cache');
  // This machine's cache holds another entry (perf's layout: a relative link to the path-named folder).
  await mkdir(join(machine, 'usr', 'bin', 'tool', 'aabbcc'), { recursive: true });
  await writeFile(join(machine, 'usr', 'bin', 'tool', 'aabbcc', 'elf'), 'tool');
  await mkdir(join(machine, '.build-id', 'aa'), { recursive: true });
  await symlink('../../usr/bin/tool/aabbcc', join(machine, '.build-id', 'aa', 'bbcc'));
  const view = await buildIdView(folder, machine, () => assert.fail('no warning expected'));
  assert.ok(view);
  try {
    assert.equal(view.placed, 1);
    const entry = join(view.dir, '.build-id', buildId.slice(0, 2), buildId.slice(2));
    assert.equal((await readElfFile(join(entry, 'elf'))).buildId, buildId);
    assert.equal(await readFile(join(view.dir, '.build-id', 'aa', 'bbcc', 'elf'), 'utf8'), 'tool');
  } finally {
    await view.remove();
  }
  assert.deepEqual(await readdir(machine), ['.build-id', 'usr'].sort());
  assert.deepEqual(await readdir(join(machine, '.build-id')), ['aa']);
});

test('a received folder whose kept binaries are huge sparse files: refused by size, nothing copied, at once', async (t) => {
  const { files, out, folder, buildId } = await setup(t);
  await keepBinaries([{ path: '/lib/libc.so.6' }], files, folder, new Map());
  // The sender made the kept copy a 4 TiB sparse file: copying its holes would take hours and fill /tmp.
  await execa('truncate', ['-s', '4T', join(out, 'target', 'binaries', buildId)]);
  const machine = await tempDir(t, 'machine-cache');
  const warnings: string[] = [];
  const started = Date.now();
  const view = await buildIdView(folder, machine, (w) => warnings.push(w));
  try {
    assert.ok(Date.now() - started < 30_000, 'done long before the holes could have been read');
    assert.equal(view?.placed, 0);
    assert.match(warnings.join('\n'), /more than the \d+ a kept binary may have/);
  } finally {
    await view?.remove();
  }
});

test('the build-id view stops copying at its file-count and byte allowances', async (t) => {
  const { files, folder } = await setup(t);
  await keepBinaries([{ path: '/lib/libc.so.6' }], files, folder, new Map());
  const machine = await tempDir(t, 'machine-cache');
  for (const limits of [
    { maxFiles: 0, maxFileBytes: 1 << 30, maxTotalBytes: 1 << 30, timeoutMs: 60_000 },
    { maxFiles: 10, maxFileBytes: 1 << 30, maxTotalBytes: 1000, timeoutMs: 60_000 },
  ]) {
    const warnings: string[] = [];
    const view = await buildIdView(folder, machine, (w) => warnings.push(w), undefined, limits);
    await view?.remove();
    assert.equal(view?.placed, 0);
    assert.match(warnings.join('\n'), /more than 0 kept binaries|allowed for the kept binaries of one folder/);
  }
});

test('one pass over the target’s files has a deadline and stops at Ctrl-C: the files left are skipped, not read', async (t) => {
  const { keep, files, folder } = await setup(t);
  const outcomes = await keep([{ path: '/lib/libc.so.6' }, { path: '/lib/escape.so' }], { passTimeoutMs: -1 });
  assert.deepEqual(
    outcomes.map((o) => [o.path, o.status, o.reason]),
    [
      ['/lib/libc.so.6', 'skipped', "the -0.001 s for one pass over the target's files are over"],
      ['/lib/escape.so', 'skipped', "the -0.001 s for one pass over the target's files are over"],
    ],
  );
  const aborted = AbortSignal.abort();
  await assert.rejects(
    keepBinaries([{ path: '/lib/libc.so.6' }], files, folder, new Map(), {}, aborted),
    (e: unknown) => isProfcpuError(e, 'ABORTED'),
  );
});

test('a machine cache entry named like the view’s own folders never receives the folder’s binaries', async (t) => {
  const { files, folder, buildId } = await setup(t);
  await keepBinaries([{ path: '/lib/libc.so.6' }], files, folder, new Map());
  const machine = await tempDir(t, 'machine-cache');
  // perf names entries after the library's path: a target library at /.kept/x or /kept/x makes these.
  for (const name of ['.kept', 'kept', 'view']) await mkdir(join(machine, name));
  const view = await buildIdView(folder, machine, () => assert.fail('no warning expected'));
  try {
    assert.equal(view?.placed, 1);
    const entry = join(view!.dir, '.build-id', buildId.slice(0, 2), buildId.slice(2));
    assert.equal((await readElfFile(join(entry, 'elf'))).buildId, buildId);
  } finally {
    await view?.remove();
  }
  for (const name of ['.kept', 'kept', 'view']) assert.deepEqual(await readdir(join(machine, name)), []);
});

test('a copy given up at its deadline writes nothing afterwards', async (t) => {
  const { keep, out } = await setup(t);
  const [outcome] = await keep([{ path: '/lib/libc.so.6' }], { copyTimeoutMs: 1 });
  assert.match(outcome?.reason ?? '', /no answer within 1 ms/);
  // Let the abandoned work finish reading the library.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.deepEqual(await readdir(join(out, 'target', 'binaries')).catch(() => []), []);
});

test('a pass ends with no .partial copy in the folder: one a given-up copy or a killed pass left is removed', async (t) => {
  const { keep, out, buildId } = await setup(t);
  // What a copy given up after it had started writing leaves once the pass closed the folder (it cannot remove it
  // then), or a pass killed mid-copy.
  await mkdir(join(out, 'target', 'binaries'), { recursive: true });
  await writeFile(join(out, 'target', 'binaries', `${'ab'.repeat(20)}.partial`), 'half a copy');
  const [outcome] = await keep([{ path: '/lib/libc.so.6' }]);
  assert.equal(outcome?.status, 'kept');
  assert.deepEqual(await readdir(join(out, 'target', 'binaries')), [buildId]);
});

// The target reader is killed when a pass outlives --target-timeout (a later file hangs): what the pass kept until
// then is indexed already, and no binary stands half-written under its build-id.
test('a pass cut short leaves what it kept indexed, each binary whole', async (t) => {
  const { files, folder, out, buildId } = await setup(t);
  const stop = new AbortController();
  // Stopped when the pass reaches its second file (as a kill would be, while that file's read hangs).
  const cut = new Proxy(files, {
    get: (target, name, receiver) =>
      name === 'lookup'
        ? (path: string, kind: 'file') => {
            if (path !== '/lib/libc.so.6') stop.abort();
            return target.lookup(path, kind);
          }
        : (Reflect.get(target, name, receiver) as unknown),
  });
  await assert.rejects(
    keepBinaries(
      ['/lib/libc.so.6', '/lib/later.so', '/lib/never.so'].map((path) => ({ path })),
      cut,
      folder,
      new Map(),
      {},
      stop.signal,
    ),
    (e: unknown) => isProfcpuError(e, 'ABORTED'),
  );
  assert.deepEqual(
    [...(await readKeptIndex(folder)).values()].map((b) => [b.path, b.buildId]),
    [['/lib/libc.so.6', buildId]],
  );
  assert.deepEqual(await readdir(join(out, 'target', 'binaries')), [buildId]);
  assert.equal((await readElfFile(join(out, 'target', 'binaries', buildId))).buildId, buildId);
});

// perf record -B (the target maps a file from a FUSE or network file system) lists the sampled files with no
// build-id: the binaries kept before recording stay, indexed with the build-ids read from them.
test('after a recording without build-ids, the binaries kept before it stay', async (t) => {
  const proc = await FakeProc.create();
  const maps = '7f0000000000-7f0000001000 r-xp 00000000 08:01 12 /lib/libc.so.6\n';
  await proc.add({ pid: 78, nspid: 1, comm: 'app', cmdline: ['app'], maps });
  await mkdir(join(proc.root, '78', 'root', 'lib'), { recursive: true });
  await copyFile(libc, join(proc.root, '78', 'root', 'lib', 'libc.so.6'));
  const out = await mkdtemp(join(tmpdir(), 'profcpu-kept-'));
  const files = await TargetFiles.open(78, { procRoot: proc.root });
  t.after(async () => {
    await files.close();
    await proc.dispose();
    await rm(out, { recursive: true, force: true });
  });
  const buildId = (await readElfFile(libc)).buildId!;
  const context = {
    target: { pid: 78 } as TargetInfo,
    dir: out,
    perfPath: 'perf',
    procRoot: proc.root,
    files,
    sampledFiles: () => Promise.resolve([]),
    signal: new AbortController().signal,
    warn: () => {},
    progress: () => {},
  };
  const step = keptBinariesStep();
  assert.equal((await step.beforeRecording!(context))?.['kept'], 1);
  assert.equal((await step.afterRecording!(context))?.['removed'], 0);
  const folder = await OutputFolder.open(out);
  t.after(() => folder.close());
  assert.deepEqual(
    [...(await readKeptIndex(folder)).values()].map((b) => [b.path, b.buildId]),
    [['/lib/libc.so.6', buildId]],
  );
  assert.equal((await readElfFile(join(out, 'target', 'binaries', buildId))).buildId, buildId);
});

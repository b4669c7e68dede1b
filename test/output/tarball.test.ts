import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rename, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { list, extract } from 'tar';
import { writeTarball } from '../../src/output/tarball.js';
import { OutputFolder } from '../../src/files/output-folder.js';

let root: string;
let dir: string;
before(async () => {
  root = await mkdtemp(join(tmpdir(), 'profcpu-tarball-'));
  dir = join(root, '15-02-11_2026-11-22');
  await mkdir(join(dir, 'target'), { recursive: true });
  await mkdir(join(dir, 'flamescope'));
  await writeFile(join(dir, 'perf.data'), Buffer.alloc(70_000, 7));
  await chmod(join(dir, 'perf.data'), 0o600);
  await writeFile(join(dir, 'target', 'perf-1.map'), '7f00 10 JS:*burn\n');
  await chmod(join(dir, 'target', 'perf-1.map'), 0o755);
  await writeFile(join(dir, 'flamescope', 'perf_script.out'), 'node 1 1.0: 1 cpu-clock:\n');
  await writeFile(join(dir, 'a-b.txt'), 'sorted before target/ and after flamescope/\n');
  await symlink('/etc/passwd', join(dir, 'escape'));
});
after(async () => {
  await rm(root, { recursive: true, force: true });
});

/** Writes the tarball of `dir` as `path` (in `dir` itself or in `root`). */
async function tarball(path: string, options: Parameters<typeof writeTarball>[2] = {}) {
  const folder = await OutputFolder.open(join(path, '..'));
  try {
    return await writeTarball(dir, { folder, name: path.slice(path.lastIndexOf('/') + 1) }, options);
  } finally {
    await folder.close();
  }
}

interface Entry {
  path: string;
  mode: number;
  mtime: number | undefined;
  uid: number | undefined;
  uname: string | undefined;
}

async function entriesOf(file: string): Promise<Entry[]> {
  const entries: Entry[] = [];
  await list({
    file,
    onReadEntry: (e) =>
      entries.push({ path: e.path, mode: e.mode ?? -1, mtime: e.mtime?.getTime(), uid: e.uid, uname: e.uname }),
  });
  return entries;
}

test('the tarball holds the folder under its basename, sorted, with fixed modes and mtime, and not itself', async () => {
  const output = join(dir, 'prof.tar.gz');
  await writeFile(output, 'an older tarball, replaced');
  const mtime = new Date('2026-11-22T15:02:11Z');
  const result = await tarball(output, { mtime });
  const top = '15-02-11_2026-11-22';
  assert.deepEqual(result.entries, [
    `${top}/`,
    `${top}/a-b.txt`,
    `${top}/flamescope/`,
    `${top}/flamescope/perf_script.out`,
    `${top}/perf.data`,
    `${top}/target/`,
    `${top}/target/perf-1.map`,
  ]);
  assert.deepEqual(result.skipped, ['escape']);
  const entries = await entriesOf(output);
  assert.deepEqual(
    entries.map((e) => e.path),
    result.entries,
  );
  const raw = new Set([`${top}/perf.data`, `${top}/target/`, `${top}/target/perf-1.map`]);
  for (const e of entries) {
    // The raw data may hold the target's secrets: private. The rest is for sharing.
    const mode = raw.has(e.path) ? (e.path.endsWith('/') ? 0o700 : 0o600) : e.path.endsWith('/') ? 0o755 : 0o644;
    assert.equal(e.mode, mode, e.path);
    assert.ok(!e.path.startsWith('/'), e.path);
    assert.ok(!e.uid, `${e.path}: no owner id`);
    assert.ok(!e.uname, `${e.path}: no owner name`);
    if (!e.path.endsWith('/')) assert.equal(e.mtime, mtime.getTime(), e.path);
  }
});

test('building twice gives identical bytes, whatever the files’ own times and modes', async () => {
  const first = join(root, 'first.tar.gz');
  const second = join(root, 'second.tar.gz');
  await tarball(first);
  await utimes(join(dir, 'perf.data'), new Date(), new Date());
  await chmod(join(dir, 'target', 'perf-1.map'), 0o600);
  await tarball(second);
  assert.deepEqual(await readFile(first), await readFile(second));
  await assert.rejects(stat(`${second}.partial`), { code: 'ENOENT' });
});

test('extracting (without preservePaths) gives the folder back', async () => {
  const output = join(root, 'extract.tar.gz');
  await tarball(output);
  const into = join(root, 'extracted');
  await mkdir(into);
  await extract({ file: output, cwd: into });
  const top = join(into, '15-02-11_2026-11-22');
  for (const path of ['perf.data', 'target/perf-1.map', 'flamescope/perf_script.out', 'a-b.txt']) {
    assert.deepEqual(await readFile(join(top, path)), await readFile(join(dir, path)), path);
  }
  await assert.rejects(stat(join(top, 'escape')), { code: 'ENOENT' });
});

test('a folder with more entries or depth than an output folder has is refused, not walked for ever', async () => {
  const { listFolder, folderLimits } = await import('../../src/output/tarball.js');
  const deep = join(root, 'deep');
  await mkdir(join(deep, ...Array.from({ length: folderLimits.maxDepth + 2 }, (_, i) => `d${i}`)), { recursive: true });
  await assert.rejects(listFolder(deep), /more than 8 deep/);
  const wide = join(root, 'wide');
  await mkdir(wide);
  await Promise.all(Array.from({ length: folderLimits.maxEntries + 1 }, (_, i) => writeFile(join(wide, `f${i}`), '')));
  await assert.rejects(listFolder(wide), /more than 10000 entries/);
});

test('started with the raw data first: those entries lead, the rest follows sorted; abandoned: no archive left', async () => {
  const { startTarball } = await import('../../src/output/tarball.js');
  const folder = await OutputFolder.open(root);
  try {
    const output = join(root, 'started.tar.gz');
    const writer = await startTarball(dir, { folder, name: 'started.tar.gz' }, ['perf.data', 'target'], {
      exclude: ['prof.tar.gz'],
    });
    // Written after the start, as postprocess writes its outputs: still archived.
    await writeFile(join(dir, 'late.txt'), 'written while the raw data was being compressed\n');
    // Added under its partial name, renamed before the archive reads it: archived under the final name all the same.
    await mkdir(join(dir, 'made'));
    await writeFile(join(dir, 'made', 'out.partial'), Buffer.alloc(3_000_000, 'x'));
    await writer.addFile('made/out', 'made/out.partial');
    await rename(join(dir, 'made', 'out.partial'), join(dir, 'made', 'out'));
    const result = await writer.finish();
    await writer.abandon();
    const top = '15-02-11_2026-11-22';
    const expected = [
      `${top}/`,
      `${top}/perf.data`,
      `${top}/target/`,
      `${top}/target/perf-1.map`,
      `${top}/made/`,
      `${top}/made/out`,
      `${top}/a-b.txt`,
      `${top}/flamescope/`,
      `${top}/flamescope/perf_script.out`,
      `${top}/late.txt`,
    ];
    assert.deepEqual(result.entries, expected);
    assert.deepEqual(
      (await entriesOf(output)).map((e) => e.path),
      expected,
    );
    const into = join(root, 'started');
    await mkdir(into);
    await extract({ file: output, cwd: into });
    for (const path of ['perf.data', 'target/perf-1.map', 'late.txt', 'made/out'])
      assert.deepEqual(await readFile(join(into, top, path)), await readFile(join(dir, path)), path);

    const abandoned = await startTarball(dir, { folder, name: 'abandoned.tar.gz' }, ['perf.data', 'target']);
    await abandoned.abandon();
    await assert.rejects(stat(join(root, 'abandoned.tar.gz.partial')), { code: 'ENOENT' });
    await assert.rejects(stat(join(root, 'abandoned.tar.gz')), { code: 'ENOENT' });
  } finally {
    await rm(join(dir, 'late.txt'), { force: true });
    await rm(join(dir, 'made'), { recursive: true, force: true });
    await folder.close();
  }
});

test(
  'a FIFO where a file should be is refused at once, no archive left, rather than blocking',
  { timeout: 10_000 },
  async () => {
    const { startTarball } = await import('../../src/output/tarball.js');
    const fifo = join(dir, 'fifo.partial');
    assert.equal(spawnSync('mkfifo', [fifo]).status, 0, 'mkfifo');
    const folder = await OutputFolder.open(root);
    try {
      const writer = await startTarball(dir, { folder, name: 'fifo.tar.gz' }, ['perf.data'], {
        exclude: ['fifo.partial'],
      });
      await writer.addFile('fifo', 'fifo.partial');
      await assert.rejects(writer.finish(), /no longer a regular file/);
      await assert.rejects(stat(join(root, 'fifo.tar.gz.partial')), { code: 'ENOENT' });
      await assert.rejects(stat(join(root, 'fifo.tar.gz')), { code: 'ENOENT' });
    } finally {
      await rm(fifo, { force: true });
      await folder.close();
    }
  },
);

test('a streamed file is archived in its place, in a gzip member of its own: tar, gzip and node-tar read it whole, the same bytes however it came in pieces', async () => {
  const { startTarball } = await import('../../src/output/tarball.js');
  const folder = await OutputFolder.open(root);
  // Text as the FlameScope file holds, 3 MB, more than a compressed chunk.
  const text = Buffer.from(
    Array.from(
      { length: 40_000 },
      (_, i) => `node ${i % 97} 1.${i}: 1 cpu-clock:\n\tffff burn+0x${i % 13} (node)\n\n`,
    ).join(''),
  );
  const stream = async (name: string, piece: () => number) => {
    const writer = await startTarball(dir, { folder, name }, ['perf.data', 'target'], {
      exclude: ['prof.tar.gz', 'flamescope/perf_script.out'],
    });
    const file = await writer.streamFile('flamescope/streamed.out');
    let given = 0;
    const done: Promise<void>[] = [];
    for (let at = 0; at < text.length;) {
      const bytes = Buffer.from(text.subarray(at, Math.min(text.length, at + piece())));
      at += bytes.length;
      done.push(new Promise((resolve, reject) => file.write(bytes, (e) => (e ? reject(e) : resolve()))));
      given++;
      await file.room();
    }
    // Added after the streamed file is ended: it comes after it.
    await writeFile(join(dir, 'after.txt'), 'made after\n');
    const ended = file.end();
    await writer.addFile('after.txt', 'after.txt');
    await ended;
    await Promise.all(done);
    const result = await writer.finish();
    return { result, given, bytes: await readFile(join(root, name)) };
  };
  try {
    const one = await stream('one.tar.gz', () => 1 + Math.floor(Math.random() * 200_000));
    const two = await stream('two.tar.gz', () => 1 << 20);
    assert.ok(one.given > two.given, 'given in more pieces the first time');
    assert.ok(one.bytes.equals(two.bytes), 'the same archive bytes');
    const top = '15-02-11_2026-11-22';
    assert.deepEqual(one.result.entries.slice(0, 6), [
      `${top}/`,
      `${top}/perf.data`,
      `${top}/target/`,
      `${top}/target/perf-1.map`,
      `${top}/flamescope/`,
      `${top}/flamescope/streamed.out`,
    ]);
    assert.equal(one.result.entries[6], `${top}/after.txt`);
    // More than one gzip member, each with the portable header (OS byte 255).
    const members = [...one.bytes.entries()].filter(
      ([i, b]) => b === 0x1f && one.bytes[i + 1] === 0x8b && one.bytes[i + 2] === 8 && one.bytes[i + 9] === 255,
    );
    assert.ok(members.length >= 3, `gzip members: ${members.length}`);
    assert.deepEqual(
      (await entriesOf(join(root, 'one.tar.gz'))).map((e) => e.path),
      one.result.entries,
    );
    const into = join(root, 'streamed');
    await mkdir(into);
    const tar = spawnSync('tar', ['-xzf', join(root, 'one.tar.gz'), '-C', into]);
    assert.equal(tar.status, 0, String(tar.stderr));
    assert.ok((await readFile(join(into, top, 'flamescope', 'streamed.out'))).equals(text));
    assert.deepEqual(await readFile(join(into, top, 'perf.data')), await readFile(join(dir, 'perf.data')));
    // The member files are gone.
    assert.deepEqual(
      readdirSync(root).filter((name) => name.includes('.partial')),
      [],
    );
  } finally {
    await rm(join(dir, 'after.txt'), { force: true });
    await folder.close();
  }
});

test('a streamed file abandoned before its end leaves no archive and no member file', async () => {
  const { startTarball } = await import('../../src/output/tarball.js');
  const folder = await OutputFolder.open(root);
  try {
    const writer = await startTarball(dir, { folder, name: 'cut.tar.gz' }, ['perf.data']);
    const file = await writer.streamFile('flamescope/cut.out');
    await new Promise<void>((resolve) => file.write(Buffer.alloc(3 << 20, 'x'), () => resolve()));
    await writer.abandon();
    assert.deepEqual(
      readdirSync(root).filter((name) => name.startsWith('cut.tar.gz')),
      [],
    );
  } finally {
    await folder.close();
  }
});

test('a streamed file’s member has no name in the folder (nothing to swap, nothing left by a killed run); a streamed file is ended once, and archived only whole', async () => {
  const { startTarball } = await import('../../src/output/tarball.js');
  const folder = await OutputFolder.open(root);
  const names = () => readdirSync(root).filter((name) => name.startsWith('whole.tar.gz'));
  try {
    const writer = await startTarball(dir, { folder, name: 'whole.tar.gz' }, ['perf.data']);
    const file = await writer.streamFile('flamescope/whole.out');
    await new Promise<void>((resolve) => file.write(Buffer.alloc(1 << 20, 'y'), () => resolve()));
    assert.deepEqual(names(), ['whole.tar.gz.partial']);
    // Left unended: the archive refuses to leave it out, and leaves nothing.
    const unended = await writer.streamFile('flamescope/unended.out');
    await file.end();
    assert.throws(() => file.write(Buffer.from('late'), () => {}), /was ended/);
    await assert.rejects(writer.finish(), /never ended/);
    assert.deepEqual(names(), []);
    await assert.rejects(writer.streamFile('flamescope/after.out'), /no longer being written/);
    await unended.end().catch(() => undefined);
  } finally {
    await folder.close();
  }
});

test('abandoned at any moment while a streamed member is copied into the archive: no error goes unheard, nothing left', async () => {
  const { startTarball } = await import('../../src/output/tarball.js');
  const folder = await OutputFolder.open(root);
  // Incompressible, so that its copy into the archive takes a while.
  const bytes = randomBytes(16 << 20);
  const unheard: unknown[] = [];
  const listener = (error: unknown) => unheard.push(error);
  process.on('uncaughtException', listener);
  try {
    for (const delay of [0, 2, 5, 10, 20]) {
      const writer = await startTarball(dir, { folder, name: 'copied.tar.gz' }, ['perf.data']);
      const file = await writer.streamFile('flamescope/copied.out');
      for (let at = 0; at < bytes.length; at += 1 << 20) {
        file.write(bytes.subarray(at, at + (1 << 20)), () => {});
        await file.room();
      }
      await file.end();
      const finishing = writer.finish();
      finishing.catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, delay));
      await writer.abandon();
      await finishing.catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(
        readdirSync(root).filter((name) => name.startsWith('copied.tar.gz.')),
        [],
        `abandoned after ${delay} ms`,
      );
      await rm(join(root, 'copied.tar.gz'), { force: true });
    }
    assert.deepEqual(unheard, []);
  } finally {
    process.off('uncaughtException', listener);
    await folder.close();
  }
});

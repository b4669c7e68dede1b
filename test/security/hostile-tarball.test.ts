// `profcpu postprocess prof.tar.gz` on an archive somebody sent (src/output/unpack.ts): links out of the folder,
// absolute paths, `..`, devices, a decompression bomb, a million entries, a truncated gzip, an archive that never ends.
// Each must end within the deadline with an error saying what was refused, write nothing outside, and leave no half
// folder next to the archive (only the archive stays there).
import { execa } from 'execa';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { unpackTarball } from '../../src/output/unpack.js';
import { cliPath, runCli } from '../support/cli.js';
import {
  craftTar,
  craftTarGz,
  entryBlocks,
  gzippedZeros,
  headerBlock,
  writeManyEntries,
  writeParts,
  type CraftedEntry,
} from '../support/crafted-tar.js';

const deadline = { timeout: 120_000 };
const top = '15-02-11_2026-11-22';
const perfData: CraftedEntry = { path: `${top}/perf.data`, body: 'not a real recording\n' };

let root: string;
/** A folder outside every case's: what hostile entries aim at. */
let outside: string;
before(async () => {
  root = await mkdtemp('/var/tmp/profcpu-hostile-tarball-');
  outside = join(root, 'outside');
  await mkdir(outside);
  await writeFile(join(outside, 'secret'), 'keep me\n');
});
after(() => rm(root, { recursive: true, force: true }));

let cases = 0;
/** A fresh folder holding only the archive `prof.tar.gz` (written by `write`). */
async function archiveCase(write: (path: string) => Promise<void>): Promise<{ dir: string; archive: string }> {
  const dir = join(root, `case-${++cases}`);
  await mkdir(dir);
  const archive = join(dir, 'prof.tar.gz');
  await write(archive);
  return { dir, archive };
}

function postprocess(archive: string, cwd: string, extra: readonly string[] = []) {
  return runCli(['postprocess', archive, ...extra], { cwd, timeout: 100_000 });
}

/** Every file under `dir` with its SHA-256 (links shown as links, not followed). */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const info = await lstat(join(dir, name));
    out[name] = info.isFile()
      ? createHash('sha256')
          .update(await readFile(join(dir, name)))
          .digest('hex')
      : info.isDirectory()
        ? 'folder'
        : 'other';
  }
  return out;
}

/** The run failed in time with `why` on stderr; the case folder holds the archive alone; `outside` is unchanged. */
async function assertRefused(
  run: Awaited<ReturnType<typeof postprocess>>,
  dir: string,
  why: RegExp,
  outsideBefore: Record<string, string>,
): Promise<void> {
  assert.equal(run.timedOut, false, `postprocess did not end:\n${String(run.all)}`);
  assert.notEqual(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), why, String(run.all));
  assert.doesNotMatch(String(run.stderr), /\n\s+at /, `a stack trace instead of a message:\n${String(run.all)}`);
  assert.deepEqual(await readdir(dir), ['prof.tar.gz'], 'something was left next to the archive');
  assert.deepEqual(await snapshot(outside), outsideBefore, 'a file outside was written');
}

async function refusedCase(entries: readonly CraftedEntry[], why: RegExp): Promise<void> {
  const before = await snapshot(outside);
  const { dir, archive } = await archiveCase((path) => writeFile(path, craftTarGz(entries)));
  await assertRefused(await postprocess(archive, dir), dir, why, before);
}

test('path traversal (top/../../x): refused, nothing written outside', deadline, async () => {
  const escape = `${top}/../../outside/escaped`;
  await refusedCase([{ path: `${top}/`, type: 'Directory' }, perfData, { path: escape, body: 'x' }], /climbs out/);
  await assert.rejects(stat(join(outside, 'escaped')), { code: 'ENOENT' });
});

test('absolute path: refused, the file is not created', deadline, async () => {
  const target = join(outside, 'absolute');
  await refusedCase([{ path: `${top}/`, type: 'Directory' }, perfData, { path: target, body: 'x' }], /absolute path/);
  await assert.rejects(stat(target), { code: 'ENOENT' });
});

test('a symbolic link to a folder outside, then a file written through it: refused at the link', deadline, async () => {
  await refusedCase(
    [
      { path: `${top}/`, type: 'Directory' },
      perfData,
      { path: `${top}/target`, type: 'SymbolicLink', linkpath: outside },
      { path: `${top}/target/secret`, body: 'overwritten' },
    ],
    /symbolic link/,
  );
});

test('a hard link to /etc/passwd: refused, no link made', deadline, async () => {
  const links = (await stat('/etc/passwd')).nlink;
  await refusedCase(
    [
      { path: `${top}/`, type: 'Directory' },
      { path: `${top}/perf.data`, type: 'Link', linkpath: '/etc/passwd' },
    ],
    /hard link/,
  );
  assert.equal((await stat('/etc/passwd')).nlink, links);
});

test('a device node and a FIFO: refused', deadline, async () => {
  await refusedCase(
    [
      { path: `${top}/`, type: 'Directory' },
      { path: `${top}/perf.data`, type: 'CharacterDevice', devmaj: 1, devmin: 3 },
    ],
    /device node/,
  );
  await refusedCase(
    [
      { path: `${top}/`, type: 'Directory' },
      { path: `${top}/target`, type: 'FIFO' },
    ],
    /a FIFO/,
  );
});

test('a 10 GB perf.data (10 MB gzipped): refused at its header, nothing written', deadline, async () => {
  const before = await snapshot(outside);
  const gigabytes = 10;
  const { dir, archive } = await archiveCase((path) =>
    writeParts(path, [
      gzipSync(Buffer.concat([entryBlocks({ path: `${top}/`, type: 'Directory' })])),
      gzipSync(headerBlock({ path: `${top}/perf.data`, size: gigabytes * 1024 ** 3 })),
      ...gzippedZeros(gigabytes * 1024),
    ]),
  );
  assert.ok((await stat(archive)).size < 20 * 1024 ** 2);
  await assertRefused(await postprocess(archive, dir), dir, /decompression bomb/, before);
});

test('an entry left out (a name no output folder has) declaring 6 GB: refused at its header', deadline, async () => {
  const before = await snapshot(outside);
  const gigabytes = 6;
  const { dir, archive } = await archiveCase((path) =>
    writeParts(path, [
      gzipSync(Buffer.concat([entryBlocks({ path: `${top}/`, type: 'Directory' }), entryBlocks(perfData)])),
      gzipSync(headerBlock({ path: `${top}/junk.bin`, size: gigabytes * 1024 ** 3 })),
      ...gzippedZeros(gigabytes * 1024),
    ]),
  );
  // Before, it was drained: 8.5 s of gunzip until the whole-stream cap ("more than N bytes of tar").
  await assertRefused(await postprocess(archive, dir), dir, /junk\.bin.*left out.*decompression bomb/, before);
});

test('a pax header declaring 10 GB (10 MB gzipped): refused at its header, not read through', deadline, async () => {
  const before = await snapshot(outside);
  const { dir, archive } = await archiveCase((path) =>
    writeParts(path, [
      gzipSync(entryBlocks({ path: `${top}/`, type: 'Directory' })),
      gzipSync(headerBlock({ path: 'PaxHeader', type: 'ExtendedHeader', size: 10 * 1024 ** 3 })),
      ...gzippedZeros(10 * 1024),
    ]),
  );
  await assertRefused(await postprocess(archive, dir), dir, /ExtendedHeader header of 10737418240 bytes/, before);
});

test('10 GB of zeros after the archive’s end: stopped after 1 MiB of them', deadline, async () => {
  const before = await snapshot(outside);
  const { dir, archive } = await archiveCase((path) =>
    writeParts(path, [
      gzipSync(craftTar([{ path: `${top}/`, type: 'Directory' }, perfData])),
      ...gzippedZeros(10 * 1024),
    ]),
  );
  await assertRefused(await postprocess(archive, dir), dir, /follow the archive's end/, before);
});

test('files each under the cap but together over it: refused at the one that passes it', deadline, async () => {
  const { dir, archive } = await archiveCase((path) =>
    writeFile(
      path,
      craftTarGz([
        { path: `${top}/`, type: 'Directory' },
        perfData,
        ...Array.from({ length: 4 }, (_, i) => ({ path: `${top}/target/part-${i}`, body: Buffer.alloc(300_000) })),
      ]),
    ),
  );
  await assert.rejects(unpackTarball(archive, { limits: { maxBytes: 1_000_000 } }), /target\/part-3.*1000000 bytes/);
  assert.deepEqual(await readdir(dir), ['prof.tar.gz']);
});

test('a million tiny entries: refused past 10 000', deadline, async () => {
  const before = await snapshot(outside);
  const { dir, archive } = await archiveCase((path) => writeManyEntries(path, top, 1_000_000));
  await assertRefused(await postprocess(archive, dir), dir, /more than 10000 entries/, before);
});

test('a truncated gzip: refused as truncated, no half folder', deadline, async () => {
  const before = await snapshot(outside);
  const whole = craftTarGz([
    { path: `${top}/`, type: 'Directory' },
    perfData,
    { path: `${top}/target/maps`, body: Buffer.alloc(200_000, 'm') },
  ]);
  const { dir, archive } = await archiveCase((path) => writeFile(path, whole.subarray(0, whole.length - 100)));
  await assertRefused(await postprocess(archive, dir), dir, /truncated or damaged/, before);
});

test('an archive that never ends (a FIFO fed for ever, /dev/zero): refused unread', deadline, async (t) => {
  const before = await snapshot(outside);
  const { dir } = await archiveCase(async () => {});
  await rm(join(dir, 'prof.tar.gz'), { force: true });
  execFileSync('mkfifo', [join(dir, 'prof.tar.gz')]);
  // A writer that would feed it for ever, were it read.
  const writer = spawn('sh', ['-c', 'exec cat /dev/zero > prof.tar.gz'], { cwd: dir, stdio: 'ignore' });
  t.after(() => writer.kill('SIGKILL'));
  const run = await postprocess(join(dir, 'prof.tar.gz'), dir);
  await assertRefused(run, dir, /is a FIFO, not a regular file/, before);
  const zero = await postprocess('/dev/zero', dir);
  assert.equal(zero.timedOut, false);
  assert.match(String(zero.stderr), /\/dev\/zero is a device, not a regular file/, String(zero.all));
});

test('names outside the one top folder, twice the same name, unknown names', deadline, async () => {
  await refusedCase(
    [{ path: `${top}/`, type: 'Directory' }, perfData, { path: 'other/perf.data', body: 'x' }],
    /outside the archive's one top folder/,
  );
  await refusedCase([{ path: `${top}/`, type: 'Directory' }, perfData, perfData], /in the archive twice/);
  // Not part of an output folder: left out (and said), the rest unpacked.
  const { dir, archive } = await archiveCase((path) =>
    writeFile(
      path,
      craftTarGz([{ path: `${top}/`, type: 'Directory' }, perfData, { path: `${top}/.bashrc`, body: 'x' }]),
    ),
  );
  const warnings: string[] = [];
  const result = await unpackTarball(archive, { warn: (w) => warnings.push(w) });
  assert.deepEqual(result.skipped, ['.bashrc']);
  assert.match(warnings.join('\n'), /left out 1 entries.*\.bashrc/);
  assert.deepEqual((await readdir(result.dir)).sort(), ['perf.data']);
  assert.equal(result.dir, join(dir, top));
  // Unpacking again: the folder exists, so it is refused rather than mixed.
  await assert.rejects(unpackTarball(archive), /already exists/);
});

test('the deadline passed, or Ctrl-C while unpacking: no half folder left', deadline, async () => {
  // 2 GiB of zeros as perf.data: long enough to be interrupted.
  const { dir, archive } = await archiveCase((path) =>
    writeParts(path, [
      gzipSync(Buffer.concat([entryBlocks({ path: `${top}/`, type: 'Directory' })])),
      gzipSync(headerBlock({ path: `${top}/perf.data`, size: 2 * 1024 ** 3 })),
      ...gzippedZeros(2 * 1024),
      gzipSync(Buffer.alloc(1024)),
    ]),
  );
  await assert.rejects(unpackTarball(archive, { limits: { deadlineMs: 300 } }), /took longer than 0.3 s/);
  assert.deepEqual(await readdir(dir), ['prof.tar.gz']);

  const run = execa(process.execPath, [cliPath, 'postprocess', archive], {
    cwd: dir,
    reject: false,
    all: true,
    timeout: 100_000,
  });
  // Wait for the unpacking folder to appear, then Ctrl-C.
  for (let i = 0; i < 2000 && !(await readdir(dir)).some((n) => n.startsWith('.profcpu-unpack-')); i++)
    await new Promise((resolve) => setTimeout(resolve, 10));
  run.kill('SIGINT');
  const result = await run;
  assert.equal(result.timedOut, false);
  assert.notEqual(result.exitCode, 0, String(result.all));
  assert.match(String(result.stderr), /aborted/, String(result.all));
  assert.deepEqual(await readdir(dir), ['prof.tar.gz']);
});

test(
  'a file that is neither gzip nor tar (text, random bytes): refused before any folder is made',
  deadline,
  async () => {
    for (const body of [
      Buffer.from('root:x:0:0:root:/root:/bin/bash\n'),
      Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) & 0xff)),
    ]) {
      const before = await snapshot(outside);
      const { dir, archive } = await archiveCase((path) => writeFile(path, body));
      await assertRefused(await postprocess(archive, dir), dir, /neither gzip nor tar/, before);
    }
  },
);

// RootedTree against the attacker's tree: links out of the root (absolute, relative, `..`, procfs magic links), link
// loops, FIFOs, devices, sockets, pseudo file systems, and a file swapped for a link while it is being opened.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { readCapped } from '../../src/files/bounded-read.js';
import { isMissing, RootedPathError, RootedTree } from '../../src/files/rooted.js';
import { isRoot } from '../support/requirements.js';

let base: string;
let root: string;
let tree: RootedTree;
const secret = 'SIDECAR-SECRET';

async function read(path: string): Promise<string> {
  const handle = await tree.lookup(path, 'file');
  try {
    return (await readCapped(handle, { maxBytes: 1 << 20, timeoutMs: 5000 })).bytes.toString();
  } finally {
    await handle.close();
  }
}

async function refusal(path: string, kind: 'file' | 'directory' | 'socket' = 'file'): Promise<RootedPathError> {
  const error = await tree.lookup(path, kind).then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(error instanceof RootedPathError, `expected a refusal for ${path}, got ${String(error)}`);
  return error;
}

before(async () => {
  base = await mkdtemp(join(tmpdir(), 'profcpu-rooted-'));
  root = join(base, 'root');
  // Outside the root, where a link must never lead: the same names as inside, with a secret.
  await mkdir(join(base, 'etc'), { recursive: true });
  await writeFile(join(base, 'etc', 'shadow'), secret);
  await writeFile(join(base, 'secret'), secret);
  await mkdir(join(root, 'etc'), { recursive: true });
  await mkdir(join(root, 'tmp', 'deep', 'er'), { recursive: true });
  await writeFile(join(root, 'etc', 'shadow'), 'target-shadow');
  await writeFile(join(root, 'tmp', 'perf-1.map'), '1 2 Main\n');
  await writeFile(join(root, 'secret'), 'inside');
  await symlink('/etc/shadow', join(root, 'tmp', 'abs-link'));
  await symlink('../../../../../../secret', join(root, 'tmp', 'deep', 'er', 'climb'));
  await symlink('perf-1.map', join(root, 'tmp', 'rel-link'));
  await symlink('loop-b', join(root, 'tmp', 'loop-a'));
  await symlink('loop-a', join(root, 'tmp', 'loop-b'));
  await symlink('/tmp/../../..', join(root, 'tmp', 'dotdot-dir'));
  await symlink('/proc/self/root/etc/shadow', join(root, 'tmp', 'magic'));
  await symlink(base, join(root, 'tmp', 'host-dir'));
  execFileSync('mkfifo', [join(root, 'tmp', 'fifo')]);
  tree = await RootedTree.open(root);
});

after(async () => {
  await tree?.close();
  await rm(base, { recursive: true, force: true });
});

test('a plain file and a relative link inside the root are read', async () => {
  assert.equal(await read('/tmp/perf-1.map'), '1 2 Main\n');
  assert.equal(await read('tmp/rel-link'), '1 2 Main\n');
});

test('an absolute link is re-rooted: /etc/shadow is the root’s, not ours', async () => {
  assert.equal(await read('/tmp/abs-link'), 'target-shadow');
});

test('`..` never climbs above the root, in the path or in a link', async () => {
  assert.equal(await read('/tmp/deep/er/climb'), 'inside');
  assert.equal(await read('/../../../secret'), 'inside');
  assert.equal(await read('/tmp/dotdot-dir/secret'), 'inside');
  assert.equal(await read('/tmp/host-dir/etc/shadow').catch((e: unknown) => e instanceof RootedPathError), true);
});

test('a procfs magic link is read as text and re-rooted', async () => {
  // /proc/self/root does not exist in this root: the link leads nowhere, and never to our own root.
  const error = await refusal('/tmp/magic');
  assert.ok(isMissing(error), error.message);
});

test('a link loop ends with an error', async () => {
  const error = await refusal('/tmp/loop-a');
  assert.equal(error.errno, 'ELOOP');
});

test('a FIFO is refused without being opened (no hang)', { timeout: 5000 }, async () => {
  const error = await refusal('/tmp/fifo');
  assert.match(error.message, /FIFO/);
});

test('a directory is not a file, a file is not a directory', async () => {
  assert.match((await refusal('/tmp')).message, /directory, not a regular file/);
  assert.match((await refusal('/tmp/perf-1.map', 'directory')).message, /regular file, not a directory/);
  assert.match((await refusal('/tmp/perf-1.map/x')).message, /not a directory/);
});

test('a missing file is told apart from a refused one', async () => {
  assert.ok(isMissing(await refusal('/tmp/nothing-here')));
  assert.ok(!isMissing(await refusal('/tmp/fifo')));
});

test('a device file is refused', { skip: !isRoot() && 'needs root for mknod' }, async () => {
  execFileSync('mknod', [join(root, 'tmp', 'zero'), 'c', '1', '5']);
  assert.match((await refusal('/tmp/zero')).message, /character device/);
});

test('a socket is found as a socket and refused as a file', async () => {
  const path = join(root, 'tmp', 'sock');
  const server = createServer().listen(path);
  await new Promise((resolve) => server.once('listening', resolve));
  try {
    const handle = await tree.lookup('/tmp/sock', 'socket');
    assert.ok(handle.stat.isSocket());
    await handle.close();
    assert.match((await refusal('/tmp/sock')).message, /socket, not a regular file/);
  } finally {
    server.close();
  }
});

test('files on procfs and sysfs are refused even inside the root', async () => {
  const real = await RootedTree.open('/');
  try {
    for (const path of ['/proc/self/environ', '/proc/self/status', '/sys/kernel/mm/transparent_hugepage/enabled']) {
      const error = await real.lookup(path, 'file').then(
        async (h) => {
          await h.close();
          return undefined;
        },
        (e: unknown) => e,
      );
      if (path.startsWith('/sys') && error instanceof RootedPathError && isMissing(error)) continue;
      assert.ok(error instanceof RootedPathError && /procfs|sysfs/.test(error.message), `${path}: ${String(error)}`);
    }
  } finally {
    await real.close();
  }
});

test('links refused: any link in the path is an error', async () => {
  const strict = await RootedTree.open(root, { links: 'refuse' });
  try {
    await assert.rejects(strict.lookup('/tmp/rel-link', 'file'), /symbolic link/);
    const ok = await strict.lookup('/tmp/perf-1.map', 'file');
    await ok.close();
  } finally {
    await strict.close();
  }
});

test(
  'a file swapped for a link to the outside while it is opened is never read from outside',
  { timeout: 30_000 },
  async () => {
    const dir = join(root, 'tmp');
    await writeFile(join(dir, 'swap-file'), 'inside-swap');
    await symlink(join(base, 'secret'), join(dir, 'swap-link'));
    // Meanwhile, a tight loop makes `race` a file, then a link to the secret outside, then a file again...
    let stop = false;
    const swapper = (async () => {
      for (let i = 0; !stop; i++) {
        await writeFile(join(dir, `swap-file-${i}`), 'inside-swap');
        await rename(join(dir, `swap-file-${i}`), join(dir, 'race'));
        await symlink(join(base, 'secret'), join(dir, `swap-link-${i}`));
        await rename(join(dir, `swap-link-${i}`), join(dir, 'race'));
      }
    })();
    const seen = new Set<string>();
    try {
      for (let i = 0; i < 2000; i++) {
        const text = await read('/tmp/race').catch((e: unknown) =>
          e instanceof RootedPathError ? 'refused' : String(e),
        );
        seen.add(text);
      }
    } finally {
      stop = true;
      await swapper;
    }
    assert.ok(!seen.has(secret), `read the secret outside the root: ${[...seen].join(', ')}`);
    // The link's target is re-rooted: it names the root's own /…/secret path, which does not exist inside.
    for (const text of seen) assert.ok(['inside-swap', 'refused'].includes(text), text);
  },
);

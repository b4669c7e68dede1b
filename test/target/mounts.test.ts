// The target's mounts, from its mountinfo alone: which file system a path lies on, so that profcpu can refuse to read
// files a FUSE or network server (possibly the target) could leave waiting for ever. The text is the target's:
// escapes, odd lines and mounts stacked on one point are handled, and nothing is read but mountinfo.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  mountOf,
  parseMountInfo,
  stallingFileSystemAt,
  stallingMappings,
  stallingMappingsOf,
  stallingMappingsOfEvery,
} from '../../src/target/mounts.js';
import { RootedPathError } from '../../src/files/rooted.js';
import { procTextLimits } from '../../src/target/procfs.js';
import { TargetFiles } from '../../src/target/target-files.js';
import { FakeProc } from '../support/fake-proc.js';
import { needRoot } from '../support/requirements.js';

const mountinfo = [
  '22 1 0:21 / / rw,relatime - overlay overlay rw,lowerdir=/l,upperdir=/u,workdir=/w',
  '23 22 0:22 / /proc rw,nosuid - proc proc rw',
  '24 22 0:23 / /tmp rw,nosuid shared:5 - tmpfs tmpfs rw',
  '25 24 0:40 / /tmp/shared\\040dir rw - fuse.sshfs host:/x rw,user_id=0',
  '26 22 0:41 / /data rw - nfs4 server:/export rw',
  '27 22 0:42 / /data rw - tmpfs tmpfs rw',
  'not a mountinfo line',
  '28 22 0:43 / relative rw - fuse x rw',
].join('\n');

test('mount points are unescaped and the longest prefix wins; the last mount on one point hides the ones below', () => {
  const mounts = parseMountInfo(mountinfo);
  assert.equal(mounts.length, 6, 'the line without " - " and the relative mount point are skipped');
  assert.equal(mountOf(mounts, '/tmp/shared dir/x.core')?.fsType, 'fuse.sshfs');
  assert.equal(mountOf(mounts, '/tmp/shared')?.fsType, 'tmpfs', 'a prefix of a name is not its folder');
  assert.equal(mountOf(mounts, '/tmp')?.fsType, 'tmpfs');
  assert.equal(mountOf(mounts, '/tmp/../tmp/shared dir')?.fsType, 'fuse.sshfs', 'the path is normalised first');
  assert.equal(mountOf(mounts, '/data/x')?.fsType, 'tmpfs', 'mounted over the nfs4 mount');
  assert.equal(mountOf(mounts, '/usr/lib')?.fsType, 'overlay');
});

test('a FUSE or network file system is named; a local one, or no mountinfo at all, is not', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  await proc.add({ pid: 40, nspid: 1, comm: 'app', cmdline: ['app'] });
  await writeFile(join(proc.root, '40', 'mountinfo'), mountinfo);
  const at = (path: string) => stallingFileSystemAt(40, path, { procRoot: proc.root });
  assert.equal(await at('/tmp/shared dir'), 'fuse.sshfs');
  assert.equal(await at('/tmp'), undefined);
  assert.equal(await at('/'), undefined);
  assert.equal(await stallingFileSystemAt(41, '/tmp', { procRoot: proc.root }), undefined, 'no such process');
  await proc.add({ pid: 42, nspid: 1, comm: 'app', cmdline: ['app'] });
  await writeFile(
    join(proc.root, '42', 'mountinfo'),
    '30 1 0:50 / / rw - nfs server:/ rw\n31 30 0:51 / /srv rw - 9p x rw\n',
  );
  // Its root mount is the container runtime's (a VM sandbox's 9p, rootless podman's fuse-overlayfs): not refused.
  assert.equal(await stallingFileSystemAt(42, '/tmp', { procRoot: proc.root }), undefined);
  assert.equal(await stallingFileSystemAt(42, '/srv/a', { procRoot: proc.root }), '9p');
  // A FUSE mount stacked on / afterwards is the target's own.
  await proc.add({ pid: 43, nspid: 1, comm: 'app', cmdline: ['app'] });
  await writeFile(
    join(proc.root, '43', 'mountinfo'),
    '30 1 0:50 / / rw - fuse.fuse-overlayfs fuse-overlayfs rw\n32 30 0:52 / / rw - fuse x rw\n',
  );
  assert.equal(await stallingFileSystemAt(43, '/tmp', { procRoot: proc.root }), 'fuse');
});

test('the files a process maps from a FUSE or network file system are found by device number, each once', () => {
  const maps = [
    // 0:40 (0x28) is the fuse.sshfs mount, whatever its path says; 0:41 (0x29) the nfs4 one.
    '7f0000000000-7f0000001000 r-xp 00000000 00:28 12 /tmp/shared dir/libcoreclr.so',
    '7f0000001000-7f0000002000 r--p 00001000 00:28 12 /tmp/shared dir/libcoreclr.so',
    '7f0000002000-7f0000003000 r-xp 00000000 00:29 13 /elsewhere/app.dll',
    // tmpfs (0:23), an anonymous mapping, a memfd on the shmem device no mountinfo line names, the vdso.
    '7f0000003000-7f0000004000 r-xp 00000000 00:17 14 /tmp/perf-1.map',
    '7f0000004000-7f0000005000 rw-p 00000000 00:00 0 ',
    '7f0000005000-7f0000006000 r-xp 00000000 00:01 15 /memfd:doublemapper (deleted)',
    '7f0000006000-7f0000007000 r-xp 00000000 00:00 0 [vdso]',
  ].join('\n');
  assert.deepEqual(stallingMappings(maps, mountinfo), [
    { path: '/tmp/shared dir/libcoreclr.so', fsType: 'fuse.sshfs', executable: true },
    { path: '/elsewhere/app.dll', fsType: 'nfs4', executable: true },
  ]);
  // Its root on rootless podman's fuse-overlayfs (0:21): the runtime's, not counted; the others still are.
  const fuseRoot = mountinfo.replace(' - overlay overlay ', ' - fuse.fuse-overlayfs fuse-overlayfs ');
  const onRoot = '7f0000008000-7f0000009000 r-xp 00000000 00:15 16 /usr/lib/libc.so.6';
  assert.deepEqual(stallingMappings(`${maps}\n${onRoot}`, fuseRoot), [
    { path: '/tmp/shared dir/libcoreclr.so', fsType: 'fuse.sshfs', executable: true },
    { path: '/elsewhere/app.dll', fsType: 'nfs4', executable: true },
  ]);
  assert.equal(stallingMappings(maps, ''), undefined, 'no mountinfo: cannot tell');
  assert.equal(stallingMappings(maps, 'not a mountinfo line\n'), undefined, 'no mount listed: cannot tell');
});

test('a process whose maps or mountinfo cannot be read whole may map anything: it cannot be told', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  const maps = '7f0000000000-7f0000001000 r-xp 00000000 00:28 12 /tmp/shared dir/libcoreclr.so\n';
  await proc.add({ pid: 60, nspid: 1, comm: 'app', cmdline: ['app'], maps });
  const mountInfoPath = join(proc.root, '60', 'mountinfo');
  await writeFile(mountInfoPath, mountinfo);
  const of = () => stallingMappingsOf(60, { procRoot: proc.root });
  assert.deepEqual(await of(), [{ path: '/tmp/shared dir/libcoreclr.so', fsType: 'fuse.sshfs', executable: true }]);
  // The FUSE mount's line past the cap.
  const filler = `1 1 0:1 / /filler rw - tmpfs t rw\n`;
  await writeFile(mountInfoPath, filler.repeat(Math.ceil(procTextLimits['mountinfo']! / filler.length)) + mountinfo);
  assert.equal(await of(), undefined, 'mountinfo cut at its cap');
  await rm(mountInfoPath);
  assert.equal(await of(), undefined, 'no mountinfo');
  await writeFile(mountInfoPath, mountinfo);
  await rm(join(proc.root, '60', 'maps'));
  assert.equal(await of(), undefined, 'no maps');
  assert.equal(await stallingMappingsOf(61, { procRoot: proc.root }), undefined, 'no such process');
});

// perf recording every CPU (the cgroup scope) reads the files of every process it sees: each process is checked, by
// its own mountinfo; kernel threads (no maps) and processes gone meanwhile are passed over; one unreadable makes the
// answer "cannot tell".
test('the files every process maps from a FUSE or network file system, each with its process', async (t) => {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  const exec = '7f0000000000-7f0000001000 r-xp 00000000 00:28 12 /tmp/shared dir/libcoreclr.so\n';
  const data = '7f0000001000-7f0000002000 rw-s 00000000 00:29 13 /data/app.sqlite\n';
  await proc.add({ pid: 70, nspid: 1, comm: 'app', cmdline: ['app'], maps: '' });
  await proc.add({ pid: 71, nspid: 2, comm: 'db', cmdline: ['db'], maps: data });
  await proc.add({ pid: 72, nspid: 3, comm: 'sidecar', cmdline: ['x'], maps: exec + data });
  await proc.add({ pid: 73, nspid: 4, comm: 'kworker', cmdline: [], maps: '' });
  for (const pid of [70, 71, 72, 73]) await writeFile(join(proc.root, String(pid), 'mountinfo'), mountinfo);
  const options = { procRoot: proc.root };
  assert.deepEqual(await stallingMappingsOfEvery(options), [
    { path: '/data/app.sqlite', fsType: 'nfs4', executable: false, pid: 71 },
    { path: '/tmp/shared dir/libcoreclr.so', fsType: 'fuse.sshfs', executable: true, pid: 72 },
    { path: '/data/app.sqlite', fsType: 'nfs4', executable: false, pid: 72 },
  ]);
  assert.deepEqual(
    (await stallingMappingsOfEvery(options))?.filter((m) => m.executable),
    [{ path: '/tmp/shared dir/libcoreclr.so', fsType: 'fuse.sshfs', executable: true, pid: 72 }],
  );
  // Gone meanwhile (no maps, no mountinfo): passed over; there but unreadable: cannot tell.
  await rm(join(proc.root, '72'), { recursive: true });
  assert.deepEqual(
    (await stallingMappingsOfEvery(options))?.filter((m) => m.executable),
    [],
  );
  // A zombie: nothing mapped, and a mountinfo that cannot be read (EINVAL): passed over.
  await rm(join(proc.root, '70', 'mountinfo'));
  await mkdir(join(proc.root, '70', 'mountinfo'));
  assert.deepEqual(await stallingMappingsOfEvery(options), [
    { path: '/data/app.sqlite', fsType: 'nfs4', executable: false, pid: 71 },
  ]);
  await rm(join(proc.root, '71', 'mountinfo'));
  await mkdir(join(proc.root, '71', 'mountinfo'));
  assert.equal(await stallingMappingsOfEvery(options), undefined);
});

// The check that keeps profcpu's own lookups off FUSE and network mounts fails closed: a mount crossed is looked up
// only when the target's mountinfo, read again after the crossing, lists it as local. A real tmpfs is mounted in a
// fake target's root; its mountinfo is then crafted the ways a hostile target could make it.
test('a lookup crosses into a mount only when the target’s mountinfo, read at the crossing, says it is local', async (t) => {
  if (!needRoot(t)) return;
  const proc = await FakeProc.create();
  await proc.add({ pid: 50, nspid: 1, comm: 'app', cmdline: ['app'] });
  const tmp = join(proc.root, '50', 'root', 'tmp');
  execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'profcpu-test', tmp]);
  t.after(async () => {
    execFileSync('umount', ['-l', tmp]);
    await proc.dispose();
  });
  await mkdir(join(tmp, 'inside'));
  const real = await readFile('/proc/self/mountinfo', 'utf8');
  const line = real.split('\n').find((l) => parseMountInfo(l)[0]?.mountPoint === tmp);
  assert.ok(line, `the tmpfs at ${tmp} is not in our mountinfo`);
  const others = real.replace(`${line}\n`, '');
  const fuseLine = line.replace(' - tmpfs profcpu-test ', ' - fuse.sshfs host:/x ');
  const setMountInfo = (text: string) => writeFile(join(proc.root, '50', 'mountinfo'), text);
  const files = await TargetFiles.open(50, { procRoot: proc.root });
  const lookup = async () => {
    const handle = await files.lookup('/tmp/inside', 'directory');
    await handle.close();
  };
  const refused = (reason: RegExp) => (error: unknown) => error instanceof RootedPathError && reason.test(error.reason);

  await setMountInfo(real);
  await lookup();
  // Made a FUSE mount after the tree was opened (mountinfo was read once before): seen at the crossing.
  await setMountInfo(real.replace(line, fuseLine));
  await assert.rejects(lookup(), refused(/^on a fuse\.sshfs file system \(refused: its server may never answer\)$/));
  await setMountInfo(others);
  await assert.rejects(lookup(), refused(/^on a mount the target’s mountinfo does not list \(refused/));
  // Listed as local, but after the cap: the cut text does not say.
  const filler = `1 1 0:1 / /filler rw - tmpfs t rw\n`;
  const cap = procTextLimits['mountinfo']!;
  await setMountInfo(others + filler.repeat(Math.ceil(cap / filler.length)) + `${line}\n`);
  await assert.rejects(lookup(), refused(/mountinfo is longer than profcpu reads\) \(refused/));
  // Cut inside its own line, right after `- fu` of `- fuse.sshfs`: part of a line is not a line.
  const upToCut = fuseLine.slice(0, fuseLine.indexOf(' - fu') + 5);
  const padding = cap - others.length - upToCut.length;
  const pad = `${filler.repeat(Math.floor(padding / filler.length) - 1)}`;
  const short = `1 1 0:1 / / rw - tmpfs t rw\n`;
  const last = short.replace('/ /', `/ /${'p'.repeat(padding - pad.length - short.length)}`);
  assert.equal(others.length + pad.length + last.length + upToCut.length, cap);
  await setMountInfo(others + pad + last + `${fuseLine}\n`);
  await assert.rejects(lookup(), refused(/mountinfo is longer than profcpu reads\) \(refused/));
  await rm(join(proc.root, '50', 'mountinfo'));
  await assert.rejects(lookup(), refused(/the target’s mountinfo cannot be read\) \(refused/));
  // Below a refused mount nothing is reached; on the same mount as an allowed folder no mountinfo is needed.
  await setMountInfo(real);
  const inside = await files.lookup('/tmp', 'directory');
  await rm(join(proc.root, '50', 'mountinfo'));
  await assert.rejects(lookup(), refused(/cannot be read/));
  await inside.close();
  await setMountInfo(real);
  await lookup();
  await files.close();

  // The mount the target's root lies on, even a FUSE one (rootless podman's fuse-overlayfs), is the container
  // runtime's: looked up; the FUSE or network mounts below it are not.
  await mkdir(join(proc.root, '50', 'root', 'etc'));
  const rootMount = mountOf(parseMountInfo(real), join(proc.root, '50', 'root'))!;
  const rootLine = real.split('\n').find((l) => l.startsWith(`${rootMount.id} `))!;
  const fuseRoot = rootLine.replace(/ - \S+ /, ' - fuse.fuse-overlayfs ');
  await setMountInfo(real.replace(rootLine, fuseRoot));
  const onFuseRoot = await TargetFiles.open(50, { procRoot: proc.root });
  try {
    await (await onFuseRoot.lookup('/etc', 'directory')).close();
    await (await onFuseRoot.lookup('/tmp/inside', 'directory')).close();
    await setMountInfo(real.replace(rootLine, fuseRoot).replace(line, fuseLine));
    await assert.rejects(onFuseRoot.lookup('/tmp/inside', 'directory'), refused(/^on a fuse\.sshfs file system/));
  } finally {
    await onFuseRoot.close();
  }
});

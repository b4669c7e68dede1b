import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../src/files/output-folder.js';
import { containerIdOf, readTargetIds } from '../../src/output/target-info.js';
import { tempDir } from '../support/temp.js';

const id = `${'a'.repeat(40)}0123456789abcdef01234567`;

test('containerIdOf: 64 hex digits ending the cgroup name, as Docker, containerd and CRI-O name theirs', () => {
  for (const [cgroup, expected] of [
    [`/system.slice/docker-${id}.scope`, id],
    [`/kubepods.slice/kubepods-burstable.slice/cri-containerd-${id}.scope`, id],
    [`/kubepods/burstable/pod1/crio-${id}`, id],
    [`/docker/${id}`, id],
    [`/machine.slice/libpod-${id}.scope/container`, undefined],
    ['/user.slice/user-0.slice/session-3.scope', undefined],
    [`/docker-${id.slice(1)}.scope`, undefined],
    [`/docker-x${id}.scope`, undefined],
  ] as const)
    assert.equal(containerIdOf(cgroup), expected, cgroup);
});

test('readTargetIds: the comm and the container id of a recorded cgroup, when they look right', async (t) => {
  const dir = await tempDir(t, 'target-info');
  await mkdir(join(dir, 'target'));
  const folder = await OutputFolder.open(dir);
  t.after(() => folder.close());
  const write = (info: unknown) => writeFile(join(dir, 'target/target.json'), JSON.stringify(info));
  await write({ pid: 7, comm: 'App', recordScope: { kind: 'cgroup', cgroup: `/system.slice/docker-${id}.scope` } });
  assert.deepEqual(await readTargetIds(folder), {
    pid: 7,
    nspid: 7,
    comm: 'App',
    recordedCgroup: true,
    containerId: id,
  });
  await write({ pid: 7, comm: 'x'.repeat(65), recordScope: { kind: 'process' } });
  assert.deepEqual(await readTargetIds(folder), { pid: 7, nspid: 7 });
});

// What the launcher tells a sidecar (the results' owner, their host path) and giving a folder to that owner.
import assert from 'node:assert/strict';
import { execa } from 'execa';
import { lstat, mkdir, stat, symlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { sidecarSettings } from '../../src/cli/sidecar-settings.js';
import { OutputFolder } from '../../src/files/output-folder.js';
import { cliPath } from '../support/cli.js';
import { needCommand, needRoot } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

test('PROFCPU_OUTPUT_OWNER and PROFCPU_HOST_OUTPUT are read; a bad owner is a warning', () => {
  const warnings: string[] = [];
  const warn = (m: string) => void warnings.push(m);
  const s = sidecarSettings(
    { PROFCPU_OUTPUT_OWNER: '1000:1001', PROFCPU_HOST_OUTPUT: '/home/u/perf-profilings=/workspace/profilings/' },
    { warn },
  );
  assert.deepEqual(s.owner, { uid: 1000, gid: 1001 });
  assert.equal(s.showPath?.('/workspace/profilings/x/flamegraph.svg'), '/home/u/perf-profilings/x/flamegraph.svg');
  assert.equal(s.showPath?.('/workspace/profilings-other/x'), '/workspace/profilings-other/x');
  assert.deepEqual(sidecarSettings({}, { warn }), {});
  assert.equal(sidecarSettings({ PROFCPU_OUTPUT_OWNER: 'alice' }, { warn }).owner, undefined);
  assert.match(warnings.join('\n'), /PROFCPU_OUTPUT_OWNER=alice is not uid:gid/);
  assert.equal(
    sidecarSettings({ PROFCPU_LAUNCHER_RUN: '1764000000-42-0a1b2c3d' }, { warn }).launcherRun,
    '1764000000-42-0a1b2c3d',
  );
  assert.equal(sidecarSettings({ PROFCPU_LAUNCHER_RUN: '"x"\n' }, { warn }).launcherRun, undefined);
  assert.match(warnings.join('\n'), /PROFCPU_LAUNCHER_RUN=[^]* is not a run name/);
});

test('chownTree gives the folder and its files to the owner, changing links but never what they point to', async (t) => {
  if (!needRoot(t)) return;
  const base = await tempDir(t, 'chown');
  const dir = join(base, 'run');
  await mkdir(join(dir, 'target'), { recursive: true });
  await writeFile(join(dir, 'perf.data'), 'x');
  await writeFile(join(dir, 'target', 'perf-1.map'), 'y');
  await writeFile(join(base, 'outside'), 'z');
  await symlink(join(base, 'outside'), join(dir, 'planted'));
  const folder = await OutputFolder.open(dir);
  await folder.chownTree({ uid: 4321, gid: 8765 });
  await folder.close();
  for (const path of [dir, join(dir, 'perf.data'), join(dir, 'target'), join(dir, 'target', 'perf-1.map')]) {
    const s = await stat(path);
    assert.deepEqual([s.uid, s.gid], [4321, 8765], path);
  }
  assert.equal((await lstat(join(dir, 'planted'))).uid, 4321);
  assert.equal((await stat(join(base, 'outside'))).uid, 0, 'the link’s target is not changed');
});

test('doctor says when kernel symbols read as zeros (no CAP_SYSLOG), and what to grant', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'setpriv', 'util-linux') || !needCommand(t, 'perf', 'linux-perf')) return;
  const run = await execa('setpriv', ['--bounding-set', '-syslog', '--', process.execPath, cliPath, 'doctor'], {
    reject: false,
    all: true,
  });
  assert.match(String(run.stdout), /^warn kptr_restrict: \/proc\/kallsyms shows every kernel address as 0/m, run.all);
  assert.match(String(run.stdout), /CAP_SYSLOG/);
});

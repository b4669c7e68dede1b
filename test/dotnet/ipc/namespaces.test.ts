// The container layouts, reproduced with namespaces (see /work/shared/FACTS.md §6): the target in its own PID and
// mount namespaces with a private tmpfs /tmp, reached from the host through /proc/PID/root, and from a sidecar
// that shares only its PID namespace.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname } from 'node:path';
import { describe, it, type TestContext } from 'node:test';
import { fileURLToPath } from 'node:url';
import { getProcessInfo } from '../../../src/dotnet/ipc/client.js';
import { preparePerfMap } from '../../../src/dotnet/perfmap/perfmap-session.js';
import { findDiagnosticSocket } from '../../../src/dotnet/ipc/socket-path.js';
import { startDotnetApp } from '../../support/dotnet-app.js';
import { startInSidecar } from '../../support/namespaces.js';
import { needCommand, needDotnet, needRoot } from '../../support/requirements.js';

const repoRoot = fileURLToPath(new URL('../../..', import.meta.url));
const probe = fileURLToPath(new URL('./sidecar-probe.ts', import.meta.url));

/** The fixture as PID 1 of a new PID namespace, with its own tmpfs /tmp (its build folder bound at /mnt). */
async function namespacedApp(t: TestContext) {
  const app = await startDotnetApp({
    seconds: 60,
    workloads: ['generic'],
    wrap: (executable, args) => [
      'unshare',
      '--pid',
      '--fork',
      '--kill-child',
      '--mount-proc',
      '--propagation',
      'private',
      'sh',
      '-c',
      'mount --bind "$0" /mnt && mount -t tmpfs tmpfs /tmp && exec /mnt/ProfcpuFixture "$@"',
      dirname(executable),
      ...args,
    ],
  });
  t.after(() => app.kill());
  return app;
}

describe('a target in its own PID and mount namespaces', () => {
  it('is reached from the host through /proc/PID/root under its namespace pid', async (t) => {
    if (!needRoot(t) || !needDotnet(t) || !needCommand(t, 'unshare', 'util-linux')) return;
    const app = await namespacedApp(t);
    assert.equal(app.nspid, 1);
    assert.notEqual(app.pid, 1);

    const socket = await findDiagnosticSocket(app.pid);
    await socket.release();
    assert.equal(socket.nspid, 1);
    assert.match(socket.hostPath, new RegExp(`^/proc/${app.pid}/root/tmp/dotnet-diagnostic-1-\\d+-socket$`));
    assert.equal(existsSync(socket.hostPath.replace(`/proc/${app.pid}/root`, '')), false, 'not in the host /tmp');
    assert.equal((await getProcessInfo(app.pid)).pid, 1);

    const session = await preparePerfMap(app.pid, 'auto');
    t.after(() => session.restore());
    assert.equal(session.state, 'enabled-by-profcpu');
    assert.equal(session.perfMapPath, `/proc/${app.pid}/root/tmp/perf-1.map`);
    assert.ok(existsSync(session.perfMapPath!) && existsSync(session.jitDumpPath!));
    await session.restore();
  });

  it('is reached from a sidecar sharing only its PID namespace, with a /tmp of its own', async (t) => {
    if (!needRoot(t) || !needDotnet(t) || !needCommand(t, 'nsenter', 'util-linux')) return;
    const app = await namespacedApp(t);
    const run = await startInSidecar(app.pid, process.execPath, ['--import', 'tsx', probe, '1'], {
      cwd: repoRoot,
      timeout: 60_000,
    });
    assert.equal(run.exitCode, 0, String(run.all));
    const stdout = String(run.stdout);
    const seen = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, unknown>;
    assert.deepEqual(seen, {
      socketPath: seen['socketPath'],
      nspid: 1,
      infoPid: 1,
      state: 'enabled-by-profcpu',
      perfMapPath: '/proc/1/root/tmp/perf-1.map',
      perfMapVisible: true,
      perfMapInOwnTmp: false,
    });
    assert.match(String(seen['socketPath']), /^\/proc\/1\/root\/tmp\/dotnet-diagnostic-1-\d+-socket$/);
  });
});

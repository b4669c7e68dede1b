import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { lutimes, readdir, rm, writeFile } from 'node:fs/promises';
import { describe, it, type TestContext } from 'node:test';
import { findDiagnosticSocket } from '../../../src/dotnet/ipc/socket-path.js';
import { isProfcpuError } from '../../../src/error.js';
import { fakeProcessView, makeSocketFile, type FakeProcess } from '../../support/fake-proc.js';

async function withFake<T>(p: FakeProcess, body: (f: Awaited<ReturnType<typeof fakeProcessView>>) => Promise<T>) {
  const fake = await fakeProcessView(p);
  try {
    return await body(fake);
  } finally {
    await fake.cleanup();
  }
}

/**
 * A process of this machine that is not .NET, its pid's leftover sockets gone: a .NET app an earlier test killed may
 * have had the same pid and left `/tmp/dotnet-diagnostic-<pid>-*-socket` behind (the runtime removes it only when it
 * exits cleanly), which the tests here would find beside their own.
 */
async function sleeper(t: TestContext): Promise<ChildProcess> {
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  t.after(() => child.kill('SIGKILL'));
  await new Promise((resolve) => child.once('spawn', resolve));
  const leftover = new RegExp(`^dotnet-diagnostic-${child.pid}-\\d+-socket$`);
  for (const name of await readdir('/tmp')) if (leftover.test(name)) await rm(`/tmp/${name}`, { force: true });
  return child;
}

describe('findDiagnosticSocket on a fake /proc', () => {
  it('names the socket after the namespace pid and prefers the one keyed by the start time', (t) =>
    withFake({ pid: 5000, nspid: 1, startTicks: 777 }, async (fake) => {
      await fake.socket('tmp/dotnet-diagnostic-1-999-socket', 2_000_000_000); // newer, but a stale one
      await fake.socket('tmp/dotnet-diagnostic-1-777-socket', 1_000_000_000);
      await fake.socket('tmp/dotnet-diagnostic-5000-777-socket'); // the host pid: not the target's name
      const socket = await findDiagnosticSocket(5000, { procRoot: fake.procRoot });
      t.after(() => socket.release());
      assert.equal(socket.hostPath, `${fake.procRoot}/5000/root/tmp/dotnet-diagnostic-1-777-socket`);
      assert.match(socket.path, /^\/proc\/self\/fd\/\d+$/);
      assert.equal(socket.nspid, 1);
      assert.equal(socket.tmpDir, '/tmp');
    }));

  it('falls back to the newest by mtime when no name carries the start time', (t) =>
    withFake({ pid: 5000, nspid: 1, startTicks: 777 }, async (fake) => {
      await fake.socket('tmp/dotnet-diagnostic-1-100-socket', 1_000_000_000);
      await fake.socket('tmp/dotnet-diagnostic-1-200-socket', 1_500_000_000);
      await fake.socket('tmp/dotnet-diagnostic-1-300-socket', 1_200_000_000);
      const socket = await findDiagnosticSocket(5000, { procRoot: fake.procRoot });
      t.after(() => socket.release());
      assert.match(socket.hostPath, /dotnet-diagnostic-1-200-socket$/);
    }));

  it("looks in the target's $TMPDIR", (t) =>
    withFake({ pid: 42, nspid: 42, startTicks: 5, env: { TMPDIR: '/var/app-tmp' } }, async (fake) => {
      await fake.socket('tmp/dotnet-diagnostic-42-5-socket');
      await fake.socket('var/app-tmp/dotnet-diagnostic-42-5-socket');
      const socket = await findDiagnosticSocket(42, { procRoot: fake.procRoot });
      t.after(() => socket.release());
      assert.equal(socket.hostPath, `${fake.procRoot}/42/root/var/app-tmp/dotnet-diagnostic-42-5-socket`);
      assert.equal(socket.environment?.get('TMPDIR'), '/var/app-tmp');
    }));

  it('says why when diagnostics are switched off, or there is no socket', async () => {
    await withFake({ pid: 42, nspid: 42, startTicks: 5, env: { DOTNET_EnableDiagnostics: '0' } }, (fake) =>
      assert.rejects(findDiagnosticSocket(42, { procRoot: fake.procRoot }), (error: unknown) => {
        assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
        assert.match(error.message, /DOTNET_EnableDiagnostics=0/);
        assert.match(error.remedy ?? '', /DOTNET_PerfMapEnabled=1/);
        return true;
      }),
    );
    await withFake({ pid: 42, nspid: 42, startTicks: 5 }, (fake) =>
      assert.rejects(findDiagnosticSocket(42, { procRoot: fake.procRoot }), (error: unknown) => {
        assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
        assert.match(error.message, /no diagnostic socket dotnet-diagnostic-42-\*-socket/);
        return true;
      }),
    );
  });

  it('a pid that does not exist is NO_TARGET', () =>
    withFake({ pid: 42, nspid: 42, startTicks: 5 }, (fake) =>
      assert.rejects(findDiagnosticSocket(43, { procRoot: fake.procRoot }), (error: unknown) =>
        isProfcpuError(error, 'NO_TARGET'),
      ),
    ));
});

describe('findDiagnosticSocket on this machine', () => {
  it('a socket older than the process (an earlier process with its pid) is never taken for its own', async (t) => {
    const child = await sleeper(t);
    const stale = `/tmp/dotnet-diagnostic-${child.pid}-1-socket`;
    await makeSocketFile(`/tmp/profcpu-scratch-${child.pid}`, stale);
    t.after(() => rm(stale, { force: true }));
    const hourAgo = Date.now() / 1000 - 3600;
    await lutimes(stale, hourAgo, hourAgo);
    await assert.rejects(findDiagnosticSocket(child.pid!), (error: unknown) => {
      assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
      assert.match(error.message, /older than the process \(left by an earlier one\)/);
      return true;
    });
  });

  it('a candidate that cannot be used says why, rather than being called older than the process', async (t) => {
    const child = await sleeper(t);
    const notSocket = `/tmp/dotnet-diagnostic-${child.pid}-1-socket`;
    await writeFile(notSocket, 'a plain file');
    t.after(() => rm(notSocket, { force: true }));
    await assert.rejects(findDiagnosticSocket(child.pid!), (error: unknown) => {
      assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
      assert.match(error.message, /cannot be used as a diagnostic socket/);
      return true;
    });
  });

  it('a process that is not .NET has no socket: IPC_UNREACHABLE with a remedy', async (t) => {
    const child = await sleeper(t);
    await assert.rejects(findDiagnosticSocket(child.pid!), (error: unknown) => {
      assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
      assert.match(error.message, new RegExp(`process ${child.pid} has no diagnostic socket`));
      assert.match(error.remedy ?? '', /\.NET/);
      return true;
    });
  });
});

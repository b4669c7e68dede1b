import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  openPerfMapFiles,
  perfMapEnabledBySetting,
  preparePerfMap,
} from '../../../src/dotnet/perfmap/perfmap-session.js';
import { ipcHresult } from '../../../src/dotnet/ipc/protocol.js';
import { isProfcpuError } from '../../../src/error.js';
import { parseJitDump } from '../../../src/formats/jit/jitdump.js';
import { hasReadyToRunTag } from '../../../src/dotnet/naming/resolver.js';
import { startDotnetApp, type DotnetAppOptions } from '../../support/dotnet-app.js';
import { needDotnet } from '../../support/requirements.js';
import { fakeProcessView } from '../../support/fake-proc.js';
import { errorReply, okReply, startFakeIpcServer } from '../ipc/ipc-bytes.js';

async function app(t: TestContext, options: DotnetAppOptions = {}) {
  const started = await startDotnetApp({ seconds: 60, workloads: ['generic', 'linq'], ...options });
  t.after(() => started.kill());
  t.after(() => rm(`/tmp/perf-${started.nspid}.map`, { force: true }));
  t.after(() => rm(`/tmp/jit-${started.nspid}.dump`, { force: true }));
  return started;
}

describe('perfMapEnabledBySetting reads the variable as the runtime does', () => {
  it('nonzero hex is on; 0, empty and garbage are off', () => {
    for (const on of ['1', '2', '3', '0x1', ' 1 ', 'a']) assert.equal(perfMapEnabledBySetting(on), true, on);
    for (const off of [undefined, '', '0', '00', 'yes', '-1']) assert.equal(perfMapEnabledBySetting(off), false, off);
  });
});

describe('preparePerfMap against the real runtime', () => {
  it('off sends nothing; auto on a target with perf maps off enables, restore disables', async (t) => {
    if (!needDotnet(t)) return;
    // Stub logging off: no stub block can end the jitdump (see client.test.ts).
    const target = await app(t, { env: { DOTNET_PerfMapStubGranularity: '4' } });

    const off = await preparePerfMap(target.pid, 'off');
    assert.equal(off.state, 'left-alone');
    await sleep(300);
    assert.equal(existsSync(off.perfMapPath!), false);

    const session = await preparePerfMap(target.pid, 'auto');
    assert.equal(session.state, 'enabled-by-profcpu');
    assert.equal(session.nspid, target.nspid);
    assert.equal(session.perfMapPath, `/proc/${target.pid}/root/tmp/perf-${target.nspid}.map`);
    assert.ok(existsSync(session.perfMapPath!) && existsSync(session.jitDumpPath!));
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: true });

    // A second run while the first still records sees the maps on and leaves them to it.
    const second = await preparePerfMap(target.pid, 'auto');
    assert.equal(second.state, 'already-enabled');
    assert.match(second.message, /enabled over diagnostic IPC earlier/);
    await second.restore();
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: true });

    await session.restore();
    await session.restore();
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: false, jitDump: false });
  });

  it('DOTNET_PerfMapEnabled=1: the jitdump the runtime abandoned is re-opened and left on after restore', async (t) => {
    if (!needDotnet(t)) return;
    const target = await app(t, { env: { DOTNET_PerfMapEnabled: '1' } });
    // .NET 10 closed the jitdump during startup (a stub block it could not copy whole).
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: false });
    const session = await preparePerfMap(target.pid, 'on');
    assert.equal(session.state, 'jitdump-reopened');
    assert.equal(session.environmentSetting, '1');
    assert.equal(session.enabledType, 2);
    assert.match(session.message, /DOTNET_PerfMapEnabled=1.*re-opened it.*leaves it on/);
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: true });
    // Re-opening replays the ReadyToRun methods, which only the jitdump names.
    const dump = parseJitDump(await readFile(session.jitDumpPath!));
    assert.ok(dump.symbols.filter((s) => hasReadyToRunTag(s.name)).length > 100, `${dump.symbols.length} records`);
    await session.restore();
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: true });
  });

  it('with DOTNET_PerfMapStubGranularity=2 as well, the jitdump enabled at startup stays open', async (t) => {
    if (!needDotnet(t)) return;
    const target = await app(t, { env: { DOTNET_PerfMapEnabled: '1', DOTNET_PerfMapStubGranularity: '2' } });
    const session = await preparePerfMap(target.pid, 'auto');
    assert.equal(session.state, 'already-enabled');
    assert.deepEqual(await openPerfMapFiles(target.pid, target.nspid), { perfMap: true, jitDump: true });
    assert.doesNotMatch(session.message, /jitdump/);
    // Stubs are logged one by one rather than by block: named, and the jitdump survives them.
    const dump = parseJitDump(await readFile(session.jitDumpPath!));
    assert.ok(
      dump.symbols.some((s) => s.name.startsWith('stub ')),
      'stubs are in the jitdump',
    );
  });

  it('restore after the target exited is quiet', async (t) => {
    if (!needDotnet(t)) return;
    const target = await app(t);
    const session = await preparePerfMap(target.pid, 'auto');
    assert.equal(session.state, 'enabled-by-profcpu');
    await target.kill();
    await session.restore();
  });

  it('a process that is not .NET: auto degrades naming the variable, on fails', async (t) => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    await new Promise((resolve) => child.once('spawn', resolve));
    const session = await preparePerfMap(child.pid!, 'auto');
    assert.equal(session.state, 'unavailable');
    assert.equal(session.error?.code, 'IPC_UNREACHABLE');
    assert.match(session.message, /DOTNET_PerfMapEnabled=1/);
    await assert.rejects(preparePerfMap(child.pid!, 'on'), (error: unknown) => {
      assert.ok(isProfcpuError(error, 'IPC_UNREACHABLE'));
      assert.match(error.message, /--perfmap on/);
      assert.match(error.remedy ?? '', /DOTNET_PerfMapEnabled=1/);
      return true;
    });
  });
});

describe('preparePerfMap on a fake /proc with a fake runtime', () => {
  async function fakeTarget(t: TestContext, reply: Buffer, fd?: string, environment?: Record<string, string>) {
    const fake = await fakeProcessView({
      pid: 900,
      nspid: 1,
      startTicks: 55,
      ...(environment && { env: environment }),
    });
    t.after(() => fake.cleanup());
    if (fd) await fake.openFd(3, fd);
    const server = await startFakeIpcServer(
      (_req, socket) => socket.end(reply),
      `${fake.targetRoot}/tmp/dotnet-diagnostic-1-55-socket`,
    );
    t.after(() => server.close());
    return { fake, server };
  }

  it('a runtime older than .NET 8 (UNKNOWN_COMMAND): auto says so, on fails with IPC_UNSUPPORTED', async (t) => {
    const { fake, server } = await fakeTarget(t, errorReply(ipcHresult.UNKNOWN_COMMAND));
    const session = await preparePerfMap(900, 'auto', { procRoot: fake.procRoot });
    assert.equal(session.state, 'unavailable');
    assert.match(session.message, /older than 8/);
    assert.match(session.message, /DOTNET_PerfMapEnabled=1/);
    assert.deepEqual(
      server.requests.map((r) => [...r.subarray(16)]),
      [[0x04, 0x05, 0, 0, 1, 0, 0, 0]],
    );
    await assert.rejects(preparePerfMap(900, 'on', { procRoot: fake.procRoot }), (error: unknown) =>
      isProfcpuError(error, 'IPC_UNSUPPORTED'),
    );
  });

  it('sends EnablePerfMap with the requested type, and DisablePerfMap on restore', async (t) => {
    const { fake, server } = await fakeTarget(t, okReply(Buffer.alloc(4)));
    const session = await preparePerfMap(900, 'auto', { procRoot: fake.procRoot, type: 3 });
    assert.equal(session.state, 'enabled-by-profcpu');
    assert.equal(session.perfMapPath, `${fake.procRoot}/900/root/tmp/perf-1.map`);
    await session.restore();
    assert.deepEqual(
      server.requests.map((r) => [...r.subarray(14)]),
      [
        [24, 0, 0x04, 0x05, 0, 0, 3, 0, 0, 0],
        [20, 0, 0x04, 0x06, 0, 0],
      ],
    );
  });

  it('an open jitdump means enabled earlier: nothing is sent', async (t) => {
    const { fake, server } = await fakeTarget(t, okReply(Buffer.alloc(4)), '/tmp/jit-1.dump');
    const session = await preparePerfMap(900, 'auto', { procRoot: fake.procRoot });
    assert.equal(session.state, 'already-enabled');
    assert.match(session.message, /enabled over diagnostic IPC earlier/);
    await session.restore();
    assert.equal(server.requests.length, 0);
  });

  it('a perf map set in the environment without its jitdump: EnablePerfMap type 2, and no DisablePerfMap', async (t) => {
    for (const setting of ['1', '2']) {
      const { fake, server } = await fakeTarget(t, okReply(Buffer.alloc(4)), '/tmp/perf-1.map', {
        DOTNET_PerfMapEnabled: setting,
      });
      const session = await preparePerfMap(900, 'auto', { procRoot: fake.procRoot });
      assert.equal(session.state, 'jitdump-reopened', setting);
      await session.restore();
      assert.deepEqual(
        server.requests.map((r) => [...r.subarray(16)]),
        [[0x04, 0x05, 0, 0, 2, 0, 0, 0]],
      );
    }
  });

  it('DOTNET_PerfMapEnabled=3 (perf map only) is left as chosen; a failed re-open keeps the advice', async (t) => {
    const only = await fakeTarget(t, okReply(Buffer.alloc(4)), '/tmp/perf-1.map', { DOTNET_PerfMapEnabled: '3' });
    const session = await preparePerfMap(900, 'auto', { procRoot: only.fake.procRoot });
    assert.equal(session.state, 'already-enabled');
    assert.match(session.message, /set DOTNET_PerfMapEnabled=1 to add it/);
    assert.equal(only.server.requests.length, 0);

    const old = await fakeTarget(t, errorReply(ipcHresult.UNKNOWN_COMMAND), '/tmp/perf-1.map', {
      COMPlus_PerfMapEnabled: '1',
    });
    const failed = await preparePerfMap(900, 'on', { procRoot: old.fake.procRoot });
    assert.equal(failed.state, 'already-enabled');
    assert.equal(failed.error?.code, 'IPC_UNSUPPORTED');
    assert.match(failed.message, /re-opening it over diagnostic IPC failed.*DOTNET_PerfMapStubGranularity=2/);
  });
});

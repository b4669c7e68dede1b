// Against the real runtime: the fixture app started with perf maps off. It sets DOTNET_PerfMapStubGranularity=4
// where the jitdump is checked, so no stub block is ever logged: .NET 10 closes a jitdump for good when it cannot copy
// one whole (seen at startup; not seen in 11 runs enabled over IPC here, but the test must not depend on it).
import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { disablePerfMap, enablePerfMap, getProcessInfo } from '../../../src/dotnet/ipc/client.js';
import { openPerfMapFiles } from '../../../src/dotnet/perfmap/perfmap-session.js';
import {
  decodeProcessInfo,
  decodeServerReply,
  encodeProcessInfoRequest,
  ipcHresult,
} from '../../../src/dotnet/ipc/protocol.js';
import { findDiagnosticSocket } from '../../../src/dotnet/ipc/socket-path.js';
import { exchange, SUN_PATH_MAX } from '../../../src/dotnet/ipc/transport.js';
import { startDotnetApp } from '../../support/dotnet-app.js';
import { needDotnet } from '../../support/requirements.js';
import { errorReply, okReply, processInfoPayload, startFakeIpcServer } from './ipc-bytes.js';

const size = (path: string): number => (existsSync(path) ? statSync(path).size : -1);

async function waitFor(what: string, condition: () => boolean, timeoutMs = 20_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !condition(); await sleep(100)) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
  }
}

describe('diagnostic IPC with a real .NET runtime', () => {
  it('ProcessInfo2, then EnablePerfMap writes perf map and jitdump, DisablePerfMap stops them', async (t) => {
    if (!needDotnet(t)) return;
    const startedMs = Date.now();
    const app = await startDotnetApp({ seconds: 120, env: { DOTNET_PerfMapStubGranularity: '4' } });
    t.after(() => app.kill());
    const perfMap = `/tmp/perf-${app.nspid}.map`;
    const jitDump = `/tmp/jit-${app.nspid}.dump`;
    t.after(() => rm(perfMap, { force: true }));
    t.after(() => rm(jitDump, { force: true }));
    // A map left by an earlier process that had this PID is not the app's: it was written before the app started.
    for (const stale of [perfMap, jitDump])
      if (existsSync(stale) && statSync(stale).mtimeMs < startedMs) await rm(stale, { force: true });

    const info = await getProcessInfo(app.pid);
    assert.equal(info.version, 2);
    assert.equal(info.pid, app.nspid);
    assert.match(info.commandLine ?? '', /ProfcpuFixture\.dll --seconds 120$/);
    assert.equal(info.managedEntrypointAssemblyName, 'ProfcpuFixture');
    assert.match(info.clrProductVersion ?? '', /^\d+\.\d+\.\d+/);
    assert.equal(info.os, 'Linux');
    assert.match(info.runtimeCookie, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);

    // The runtime still answers the original ProcessInfo too.
    const socket = await findDiagnosticSocket(app.pid);
    const v1 = await exchange(socket.path, encodeProcessInfoRequest()).finally(() => socket.release());
    assert.equal(decodeProcessInfo(decodeServerReply(v1.header, v1.payload, 'ProcessInfo'), 1).pid, app.nspid);

    assert.equal(size(perfMap), -1, 'no perf map before EnablePerfMap');
    await enablePerfMap(app.pid);
    const mapText = readFileSync(perfMap, 'utf8');
    // Methods compiled before the switch are replayed: Main ran once, at startup, and is never compiled again.
    assert.match(mapText, /\[ProfcpuFixture\] ProfcpuFixture\.Program::Main\(string\[\]\)/);
    assert.match(mapText, /ProfcpuFixture\.Hot\+Outer`1\+Inner`1\[System\.Int32,System\.__Canon\]::Churn\(int32\)/);
    assert.match(readFileSync(jitDump).toString('latin1'), /ProfcpuFixture\.AllocationStorm::Blizzard/);
    const afterEnable = { map: size(perfMap), dump: size(jitDump) };
    await waitFor('the perf map to grow', () => size(perfMap) > afterEnable.map);
    await waitFor('the jitdump to grow', () => size(jitDump) > afterEnable.dump);
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: true, jitDump: true });

    await disablePerfMap(app.pid);
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: false, jitDump: false });
    const afterDisable = { map: size(perfMap), dump: size(jitDump) };
    await sleep(1500);
    assert.deepEqual({ map: size(perfMap), dump: size(jitDump) }, afterDisable, 'no growth after DisablePerfMap');
  });

  it(`reaches a runtime whose socket path via /proc/PID/root exceeds ${SUN_PATH_MAX} bytes`, async (t) => {
    if (!needDotnet(t)) return;
    // Long enough that /proc/PID/root/<TMPDIR>/dotnet-diagnostic-... is too long, short enough for the runtime itself.
    const base = await mkdtemp('/tmp/profcpu-long-');
    const tmp = `${base}/${'t'.repeat(56 - base.length)}`;
    await mkdir(tmp);
    t.after(() => rm(base, { recursive: true, force: true }));
    const app = await startDotnetApp({ seconds: 60, workloads: ['generic'], env: { TMPDIR: tmp } });
    t.after(() => app.kill());

    const socket = await findDiagnosticSocket(app.pid);
    await socket.release();
    assert.equal(socket.tmpDir, tmp);
    const length = Buffer.byteLength(socket.hostPath);
    assert.ok(length > SUN_PATH_MAX, `${socket.hostPath} is ${length} bytes`);
    assert.ok(Buffer.byteLength(socket.hostPath.replace(/^\/proc\/\d+\/root/, '')) <= SUN_PATH_MAX);
    const info = await getProcessInfo(app.pid);
    assert.equal(info.pid, app.nspid);
    assert.equal(info.managedEntrypointAssemblyName, 'ProfcpuFixture');
  });
});

describe('getProcessInfo on an older runtime (fake server)', () => {
  it('falls back to ProcessInfo when ProcessInfo2 is an UNKNOWN_COMMAND', async () => {
    const fields = {
      pid: 7,
      cookie: Buffer.alloc(16, 1),
      commandLine: 'dotnet app.dll',
      os: 'Linux',
      arch: 'x64',
      entrypoint: null,
      version: null,
    };
    const server = await startFakeIpcServer((req, socket) =>
      socket.end(req[17] === 0x04 ? errorReply(ipcHresult.UNKNOWN_COMMAND) : okReply(processInfoPayload(fields, 1))),
    );
    try {
      const info = await getProcessInfo(server.path);
      assert.equal(info.version, 1);
      assert.equal(info.commandLine, 'dotnet app.dll');
      assert.deepEqual(
        server.requests.map((r) => r[17]),
        [0x04, 0x00],
      );
    } finally {
      await server.close();
    }
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StepContext } from '../../../src/step/step.js';
import { openPerfMapFiles } from '../../../src/dotnet/perfmap/perfmap-session.js';
import { perfMapStep } from '../../../src/dotnet/perfmap/perfmap-step.js';
import { inspectProcess, type TargetInfo } from '../../../src/target/inspect.js';
import { startDotnetApp } from '../../support/dotnet-app.js';
import { needDotnet } from '../../support/requirements.js';
import { fakeProcessView } from '../../support/fake-proc.js';
import { okReply, startFakeIpcServer } from '../ipc/ipc-bytes.js';

async function stepContext(pid: number, signal: AbortSignal) {
  const lines: { warn: string[]; progress: string[] } = { warn: [], progress: [] };
  const context: StepContext = {
    target: await inspectProcess(pid),
    dir: '/nonexistent',
    perfPath: 'perf',
    procRoot: '/proc',
    signal,
    warn: (m) => lines.warn.push(m),
    progress: (m) => lines.progress.push(m),
  };
  return { context, lines };
}

/**
 * A fake .NET process (pid 900, namespace pid 1) in a fake /proc, whose diagnostic socket answers every command OK;
 * the step context records warnings and progress lines apart.
 */
async function fakeDotnetTarget(t: TestContext, environment?: Record<string, string>) {
  const fake = await fakeProcessView({ pid: 900, nspid: 1, startTicks: 55, ...(environment && { env: environment }) });
  t.after(() => fake.cleanup());
  const server = await startFakeIpcServer(
    (_req, socket) => socket.end(okReply(Buffer.alloc(4))),
    `${fake.targetRoot}/tmp/dotnet-diagnostic-1-55-socket`,
  );
  t.after(() => server.close());
  const lines: { warn: string[]; progress: string[] } = { warn: [], progress: [] };
  const context: StepContext = {
    target: { pid: 900, runtime: 'dotnet' } as TargetInfo,
    dir: '/nonexistent',
    perfPath: 'perf',
    procRoot: fake.procRoot,
    signal: new AbortController().signal,
    warn: (m) => lines.warn.push(m),
    progress: (m) => lines.progress.push(m),
  };
  return { fake, server, context, lines };
}

async function dotnetTarget(t: TestContext) {
  // Stub logging off: no stub block can end the jitdump (see client.test.ts; the warning for that is tested below).
  const app = await startDotnetApp({
    seconds: 60,
    workloads: ['generic'],
    env: { DOTNET_PerfMapStubGranularity: '4' },
  });
  t.after(() => app.kill());
  t.after(() => rm(`/tmp/perf-${app.nspid}.map`, { force: true }));
  t.after(() => rm(`/tmp/jit-${app.nspid}.dump`, { force: true }));
  return app;
}

describe('the perfMap collect step', () => {
  it('enables before recording and restores after, reporting both', async (t) => {
    if (!needDotnet(t)) return;
    const app = await dotnetTarget(t);
    const { context, lines } = await stepContext(app.pid, new AbortController().signal);
    const step = perfMapStep({ mode: 'auto' });
    const before = await step.beforeRecording!(context);
    assert.deepEqual(
      { ...before, message: undefined },
      { mode: 'auto', state: 'enabled-by-profcpu', nspid: app.nspid, enabledType: 1, message: undefined },
    );
    assert.equal(lines.progress.length, 1);
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: true, jitDump: true });
    assert.deepEqual(await step.afterRecording!(context), { restored: true });
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: false, jitDump: false });
  });

  it('restores when the session is aborted before the after-recording steps', async (t) => {
    if (!needDotnet(t)) return;
    const app = await dotnetTarget(t);
    const controller = new AbortController();
    const { context } = await stepContext(app.pid, controller.signal);
    await perfMapStep({ mode: 'auto' }).beforeRecording!(context);
    controller.abort();
    // The runtime closes the two files one after the other: wait for both (seen under load: the jitdump a moment later).
    for (let i = 0; i < 100; i++) {
      const open = await openPerfMapFiles(app.pid, app.nspid);
      if (open?.perfMap === false && open.jitDump === false) break;
      await sleep(50);
    }
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: false, jitDump: false });
  });

  it('warns when the runtime stopped writing its jitdump during the recording', async (t) => {
    const { fake, server, context, lines } = await fakeDotnetTarget(t);
    const step = perfMapStep({ mode: 'auto', procRoot: fake.procRoot });
    assert.equal((await step.beforeRecording!(context))?.['state'], 'enabled-by-profcpu');
    // While recording, the runtime kept its perf map open but closed the jitdump.
    await fake.openFd(7, '/tmp/perf-1.map');
    assert.deepEqual(await step.afterRecording!(context), { restored: true, jitDumpStopped: true });
    assert.equal(lines.warn.length, 1);
    assert.match(lines.warn[0]!, /stopped writing its jitdump.*DOTNET_PerfMapStubGranularity=2/);
    assert.deepEqual(
      server.requests.map((r) => r[17]),
      [0x05, 0x06],
    );
  });

  it('re-opens the jitdump of an app that sets DOTNET_PerfMapEnabled=1 and never sends DisablePerfMap', async (t) => {
    const { fake, server, context, lines } = await fakeDotnetTarget(t, { DOTNET_PerfMapEnabled: '1' });
    await fake.openFd(5, '/tmp/perf-1.map');
    const step = perfMapStep({ mode: 'auto', procRoot: fake.procRoot });
    const before = await step.beforeRecording!(context);
    assert.equal(before?.['state'], 'jitdump-reopened');
    assert.equal(before?.['enabledType'], 2);
    assert.match(String(before?.['message']), /leaves it on after the recording/);
    await fake.openFd(6, '/tmp/jit-1.dump');
    assert.deepEqual(await step.afterRecording!(context), { restored: false, jitDumpLeftOn: true });
    assert.deepEqual(
      server.requests.map((r) => r[17]),
      [0x05],
    );
    assert.equal(lines.warn.length + lines.progress.length, 1);
  });

  it('leaves a process that is not .NET alone, without warnings', async (t) => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    t.after(() => child.kill('SIGKILL'));
    await new Promise((resolve) => child.once('spawn', resolve));
    const { context, lines } = await stepContext(child.pid!, new AbortController().signal);
    const step = perfMapStep({ mode: 'on' });
    assert.deepEqual(await step.beforeRecording!(context), { mode: 'on', state: 'not-dotnet' });
    assert.equal(await step.afterRecording!(context), undefined);
    assert.deepEqual(lines.warn, []);
  });
});

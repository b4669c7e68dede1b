import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { describe, it, type TestContext } from 'node:test';
import type { StepContext } from '../../src/collect/steps.js';
import { openPerfMapFiles } from '../../src/dotnet/perfmap-session.js';
import { perfMapStep } from '../../src/dotnet/perfmap-step.js';
import { inspectProcess } from '../../src/target/inspect.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { needCommand } from '../support/requirements.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function stepContext(pid: number, signal: AbortSignal) {
  const lines: { warn: string[]; progress: string[] } = { warn: [], progress: [] };
  const context: StepContext = {
    target: await inspectProcess(pid),
    dir: '/nonexistent',
    signal,
    warn: (m) => lines.warn.push(m),
    progress: (m) => lines.progress.push(m),
  };
  return { context, lines };
}

async function dotnetTarget(t: TestContext) {
  const app = await startDotnetApp({ seconds: 60, workloads: ['generic'] });
  t.after(() => app.kill());
  t.after(() => rm(`/tmp/perf-${app.nspid}.map`, { force: true }));
  t.after(() => rm(`/tmp/jit-${app.nspid}.dump`, { force: true }));
  return app;
}

describe('the perfMap collect step', () => {
  it('enables before recording and restores after, reporting both', async (t) => {
    if (!needCommand(t, 'dotnet', 'the .NET SDK')) return;
    const app = await dotnetTarget(t);
    const { context, lines } = await stepContext(app.pid, new AbortController().signal);
    const step = perfMapStep({ mode: 'auto' });
    const before = await step.beforeRecording!(context);
    assert.deepEqual(
      { ...before, message: undefined },
      { mode: 'auto', state: 'enabled-by-profcpu', nspid: app.nspid, message: undefined },
    );
    assert.equal(lines.progress.length, 1);
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: true, jitDump: true });
    assert.deepEqual(await step.afterRecording!(context), { restored: true });
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: false, jitDump: false });
  });

  it('restores when the session is aborted before the after-recording steps', async (t) => {
    if (!needCommand(t, 'dotnet', 'the .NET SDK')) return;
    const app = await dotnetTarget(t);
    const controller = new AbortController();
    const { context } = await stepContext(app.pid, controller.signal);
    await perfMapStep({ mode: 'auto' }).beforeRecording!(context);
    controller.abort();
    for (let i = 0; i < 100; i++) {
      if ((await openPerfMapFiles(app.pid, app.nspid))?.perfMap === false) break;
      await sleep(50);
    }
    assert.deepEqual(await openPerfMapFiles(app.pid, app.nspid), { perfMap: false, jitDump: false });
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

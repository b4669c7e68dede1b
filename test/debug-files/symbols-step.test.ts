// The `collect --symbols` step against the .NET fixture app: its libcoreclr.so's debug file comes from a loopback
// SSQP store. The store's file is made from the SDK's own libcoreclr.so with `objcopy --only-keep-debug`, which
// keeps the build-id: that is all profcpu verifies, so the whole path (maps, /proc/PID/root, SSQP key, verification,
// perf cache entry) runs for real without Microsoft's server.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, test } from 'node:test';
import type { StepContext } from '../../src/step/step.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { symbolsStep } from '../../src/debug-files/symbols-step.js';
import { ssqpDebugKey, type SymbolServer } from '../../src/debug-files/symbol-server.js';
import { inspectProcess } from '../../src/target/inspect.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { needCommand, needDotnet } from '../support/requirements.js';
import { startStaticServer, type StaticServer } from '../support/static-server.js';

let work: string;
let store: StaticServer;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'profcpu-symbols-step-'));
  store = await startStaticServer(join(work, 'store'));
});
after(async () => {
  await store.close();
  rmSync(work, { recursive: true, force: true });
});

function context(target: StepContext['target']) {
  const lines = { warn: [] as string[], progress: [] as string[] };
  const ctx: StepContext = {
    target,
    dir: work,
    perfPath: 'perf',
    procRoot: '/proc',
    signal: new AbortController().signal,
    warn: (m) => lines.warn.push(m),
    progress: (m) => lines.progress.push(m),
  };
  return { ctx, lines };
}

test('a .NET target: libcoreclr.so’s debug file fetched by build-id and placed; a dead server is a warning', async (t) => {
  if (!needDotnet(t) || !needCommand(t, 'objcopy', 'binutils')) return;
  const app = await startDotnetApp({ seconds: 60, workloads: ['generic'] });
  t.after(() => app.kill());
  const target = await inspectProcess(app.pid);
  const coreclr = target.dotnet!.coreclrPath;
  const { buildId } = await readElfFile(`/proc/${app.pid}/root${coreclr}`);
  const key = join(work, 'store', ssqpDebugKey(buildId!));
  mkdirSync(dirname(key), { recursive: true });
  execFileSync('objcopy', ['--only-keep-debug', `/proc/${app.pid}/root${coreclr}`, key]);

  const servers: SymbolServer[] = [{ kind: 'ssqp', url: store.url, origin: 'test' }];
  const buildIdDir = join(work, 'perf-debug');
  const { ctx, lines } = context(target);
  const report = await symbolsStep({ mode: 'coreclr', servers, cacheDir: join(work, 'cache'), buildIdDir })
    .afterRecording!(ctx);
  assert.ok(report);
  const libraries = report['libraries'] as { path: string; buildId: string; status: string; source: string }[];
  assert.deepEqual(
    libraries.map((l) => [l.path, l.buildId, l.status, l.source]),
    [[coreclr, buildId, 'placed', store.url]],
  );
  assert.ok(existsSync(join(buildIdDir, coreclr, buildId!, 'debug')));
  assert.deepEqual(store.requests, [`/${ssqpDebugKey(buildId!)}`]);
  assert.deepEqual(lines.warn, []);
  assert.ok(lines.progress.some((m) => m.includes(`symbols for ${coreclr}`)));

  const dead: SymbolServer[] = [{ kind: 'ssqp', url: `${store.url}/broken`, origin: 'test' }];
  store.faults.set(`/broken/${ssqpDebugKey(buildId!)}`, { kind: 'status', status: 503 });
  const other = context(target);
  const failed = await symbolsStep({
    mode: 'coreclr',
    servers: dead,
    cacheDir: join(work, 'cache-2'),
    buildIdDir: join(work, 'perf-debug-2'),
    fetch: { retries: 0 },
  }).afterRecording!(other.ctx);
  assert.ok(failed);
  assert.equal((failed['libraries'] as { status: string }[])[0]?.status, 'failed');
  assert.equal(other.lines.warn.length, 1);
  assert.match(other.lines.warn[0]!, /HTTP 503/);
});

test('none does nothing; coreclr on a process without .NET has nothing to fetch', async () => {
  const target = await inspectProcess(process.pid);
  const { ctx } = context(target);
  assert.deepEqual(await symbolsStep({ mode: 'none', servers: [] }).afterRecording!(ctx), { mode: 'none' });
  assert.deepEqual(await symbolsStep({ mode: 'coreclr', servers: [] }).afterRecording!(ctx), {
    mode: 'coreclr',
    state: 'not-dotnet',
  });
});

test('sampled: the files perf sampled lacking symbols, up to maxLibraries, with the fix past it', async () => {
  const target = await inspectProcess(process.pid);
  // This process's C library, as perf would have listed it; and the kernel, which is no file.
  const libc = /\s(\/\S*\/libc\.so\.6)$/m.exec(readFileSync('/proc/self/maps', 'utf8'))?.[1];
  assert.ok(libc, 'node maps libc.so.6');
  const elf = await readElfFile(libc);
  const sampled = [
    { buildId: elf.buildId!, path: libc },
    { buildId: 'ab'.repeat(20), path: '[kernel.kallsyms]' },
  ];
  const stripped = !elf.hasSymtab && !elf.hasDebugInfo;
  const dirs = { cacheDir: join(work, 'sampled-cache'), buildIdDir: join(work, 'sampled-perf') };

  const { ctx } = context(target);
  let asked = 0;
  ctx.sampledFiles = () => (asked++, Promise.resolve(sampled));
  const report = await symbolsStep({ mode: 'sampled', servers: [], ...dirs }).afterRecording!(ctx);
  assert.equal(asked, 1);
  assert.equal(report?.['maxLibraries'], 32);
  const libraries = report?.['libraries'] as { path: string; status: string }[];
  assert.deepEqual(
    libraries.map((l) => [l.path, l.status]),
    [[libc, stripped ? 'offline' : 'has-symbols']],
  );

  if (!stripped) return;
  const capped = context(target);
  capped.ctx.sampledFiles = () => Promise.resolve(sampled);
  const over = await symbolsStep({ mode: 'sampled', servers: [], maxLibraries: 0, ...dirs }).afterRecording!(
    capped.ctx,
  );
  assert.deepEqual(
    (over?.['libraries'] as { status: string }[]).map((l) => l.status),
    ['over-limit'],
  );
  assert.equal(capped.lines.warn.length, 1);
  assert.match(
    capped.lines.warn[0]!,
    new RegExp(`first 0 libraries lacking symbols; not for ${libc} \\(fix: \`profcpu symbols --pid ${process.pid}\``),
  );
});

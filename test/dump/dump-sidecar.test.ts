// End to end: the .NET fixture app (on .NET 10, and self-contained on .NET 8) as PID 1 of its own PID and mount namespaces (its /tmp a private tmpfs), dumped by
// the built CLI from a sidecar that shares only its PID namespace, with no folder in common. Each dump type must open
// in a reader we did not write (ClrMD, test/fixtures/clrmd-reader): its threads listed and the fixture's own methods
// found on managed stacks; the manifest must describe the file exactly, and the target's temp folder keep nothing.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { cp, readdir, readFile, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { test, type TestContext } from 'node:test';
import type { DumpTypeName } from '../../src/dotnet/ipc/dump-protocol.js';
import type { DumpManifest } from '../../src/dump/dump-manifest.js';
import { readDump } from '../support/clrmd-reader.js';
import { buildDotnetApp, type DotnetVersion } from '../support/dotnet-app.js';
import { runCliInSidecar, startNamespacedTarget } from '../support/namespaces.js';
import { needCommand, needDotnet, needRoot } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

async function sha256(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest('hex');
}

function prerequisites(t: TestContext): boolean {
  return (
    needRoot(t) && needCommand(t, 'unshare', 'util-linux') && needCommand(t, 'nsenter', 'util-linux') && needDotnet(t)
  );
}

/** The fixture on .NET `version` in its namespaces, dumped from a sidecar in each of `types`, each dump checked. */
async function dumpFromSidecar(t: TestContext, version: DotnetVersion, types: readonly DumpTypeName[]): Promise<void> {
  const work = await tempDir(t, 'dump', '/var/tmp');
  // The app outside /tmp: the target's /tmp is a fresh tmpfs, which hides the build cache there.
  const built = await buildDotnetApp(version);
  await cp(dirname(built), join(work, 'app'), { recursive: true });
  const target = await startNamespacedTarget(join(work, 'app', basename(built)), [], {
    ready: async ({ hostPid }) =>
      (await readdir(`/proc/${hostPid}/root/tmp`).catch(() => [] as string[])).some((n) =>
        n.startsWith('dotnet-diagnostic-'),
      ),
    readyTimeoutMs: 60_000,
  });
  t.after(() => target.kill());
  // Every workload thread running (the app says "ready" on a stdout the namespace helper does not keep).
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const out = join(work, 'out');

  for (const [i, type] of types.entries()) {
    // Both spellings of --pid, as the original tool took them.
    const pid = i % 2 === 0 ? ['-pid', '1'] : ['--pid', '1'];
    const run = await runCliInSidecar(target.hostPid, ['dump', ...pid, '--type', type, '--output', out], {
      cwd: work,
      timeout: 300_000,
    });
    assert.equal(run.exitCode, 0, String(run.all));
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as DumpManifest;
    assert.equal(manifest.kind, 'dump');
    assert.equal(manifest.dumps.length, i + 1, 'one entry per dump, earlier ones kept');
    const entry = manifest.dumps.at(-1)!;
    assert.equal(entry.type, type);
    assert.equal(entry.target.nspid, 1);
    assert.equal(entry.target.runtimeVersion?.split('.')[0], String(version));
    assert.equal(entry.command, 'GenerateCoreDump3', 'the newest command, known since .NET 7');
    const path = join(out, entry.file);
    assert.equal(String(run.stdout).split('\n')[0], path, 'stdout names the dump');
    assert.equal((await stat(path)).size, entry.bytes);
    assert.equal((await stat(path)).mode & 0o777, 0o600, 'a dump holds the target’s memory: private');
    assert.equal(await sha256(path), entry.sha256);
    t.diagnostic(
      `.NET ${version} ${type}: ${entry.bytes} bytes, runtime ${entry.durationsMs.dump} ms, copy ${entry.durationsMs.copy} ms`,
    );

    const seen = await readDump(path);
    assert.ok(seen.osThreads >= 5 && seen.osThreads < 200, `${seen.osThreads} OS threads`);
    const managed = seen.threads.filter((th) => th.frames.length > 0);
    assert.ok(managed.length >= 5, `${type}: managed stacks on ${managed.length} threads:\n${JSON.stringify(seen)}`);
    const frames = new Set(seen.threads.flatMap((th) => th.frames));
    for (const method of ['ProfcpuFixture.Program.Main', 'ProfcpuFixture.Workloads.Run'])
      assert.ok(frames.has(method), `${type}: ${method} on a managed stack:\n${[...frames].join('\n')}`);
    // The worker threads the app started are the ones ClrMD finds running its workloads.
    assert.ok(
      seen.threads.filter((th) => th.frames.includes('ProfcpuFixture.Workloads.Run')).length >= 3,
      `${type}: several workload threads`,
    );
  }
  const left = (await readdir(`/proc/${target.hostPid}/root/tmp`)).filter((n) => n.startsWith('profcpu-dump-'));
  assert.deepEqual(left, [], 'the target’s copies are removed');
  assert.deepEqual(
    (await readdir(out)).filter((n) => n.endsWith('.partial')),
    [],
    'no partial file left',
  );
}

test('dump from a sidecar: every type opens in ClrMD with the fixture’s methods on managed stacks', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFromSidecar(t, 10, ['mini', 'triage', 'heap', 'full']);
});

test('dump from a sidecar of a self-contained .NET 8 app: ClrMD reads it too', async (t) => {
  if (!prerequisites(t)) return;
  await dumpFromSidecar(t, 8, ['heap']);
});

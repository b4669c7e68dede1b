// A self-contained .NET app's runtime version, read from the runtimeconfig.json beside its libcoreclr.so
// (src/target/self-contained.ts): through inspectProcess on a fake target, the parser on what the SDK writes and on
// hostile files (no version, a huge file, a FIFO, a link out of the root), each under a deadline.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { inspectProcess } from '../../src/target/inspect.js';
import { includedRuntimeVersion } from '../../src/target/self-contained.js';
import { FakeProc } from '../support/fake-proc.js';

const selfContainedMaps = [
  '7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /app/libcoreclr.so',
  '7f0000400000-7f0000500000 r-xs 00000000 00:01 99 /memfd:doublemapper (deleted)',
].join('\n');

/** What `dotnet publish --self-contained` wrote for the fixture on .NET 8 (test/fixtures/dotnet-app). */
const sdkConfig = JSON.stringify({
  runtimeOptions: {
    tfm: 'net8.0',
    includedFrameworks: [{ name: 'Microsoft.NETCore.App', version: '8.0.31' }],
    configProperties: { 'System.Globalization.Invariant': true },
  },
});

async function target(t: import('node:test').TestContext, files: Record<string, string>) {
  const proc = await FakeProc.create();
  t.after(() => proc.dispose());
  await proc.add({ pid: 31, nspid: 1, comm: 'Shop', cmdline: ['/app/Shop'], maps: selfContainedMaps, files });
  return proc;
}

test('a self-contained app: the version comes from the runtimeconfig.json beside libcoreclr.so', async (t) => {
  const proc = await target(t, { '/app/Shop.runtimeconfig.json': sdkConfig, '/app/Shop.dll': '' });
  const info = await inspectProcess(31, { procRoot: proc.root });
  assert.equal(info.runtime, 'dotnet');
  assert.equal(info.dotnet?.coreclrPath, '/app/libcoreclr.so');
  assert.equal(info.dotnet?.version, '8.0.31');
});

test('no runtimeconfig.json, or one without an included runtime: the version stays unknown', async (t) => {
  const frameworkDependent = JSON.stringify({
    runtimeOptions: { tfm: 'net8.0', framework: { name: 'Microsoft.NETCore.App', version: '8.0.0' } },
  });
  const proc = await target(t, { '/app/Shop.runtimeconfig.json': frameworkDependent });
  const info = await inspectProcess(31, { procRoot: proc.root });
  assert.equal(info.runtime, 'dotnet');
  assert.equal(info.dotnet?.version, undefined);
});

test('includedRuntimeVersion accepts the SDK’s form only', () => {
  assert.equal(includedRuntimeVersion(sdkConfig), '8.0.31');
  assert.equal(
    includedRuntimeVersion(
      '{"runtimeOptions":{"includedFrameworks":[{"name":"Microsoft.NETCore.App","version":"9.0.0-rc.2.24473.5"}]}}',
    ),
    '9.0.0-rc.2.24473.5',
  );
  for (const text of [
    '',
    'null',
    '[]',
    '{"runtimeOptions":null}',
    '{"runtimeOptions":{"includedFrameworks":{"name":"Microsoft.NETCore.App","version":"8.0.1"}}}',
    '{"runtimeOptions":{"includedFrameworks":[null,1,"x"]}}',
    '{"runtimeOptions":{"includedFrameworks":[{"name":"Microsoft.AspNetCore.App","version":"8.0.1"}]}}',
    '{"runtimeOptions":{"includedFrameworks":[{"name":"Microsoft.NETCore.App","version":"8.0.1\\n; rm -rf /"}]}}',
    `{"runtimeOptions":{"includedFrameworks":[{"name":"Microsoft.NETCore.App","version":"8.0.1${'a'.repeat(100)}"}]}}`,
  ])
    assert.equal(includedRuntimeVersion(text), undefined, text);
});

test(
  'hostile app folders: a huge config, a FIFO, a link out of the root give no version and no hang',
  { timeout: 20_000 },
  async (t) => {
    const huge = JSON.stringify({
      runtimeOptions: { includedFrameworks: [{ name: 'Microsoft.NETCore.App', version: '8.0.1' }] },
      pad: 'x'.repeat(1 << 20),
    });
    const proc = await target(t, { '/app/A.runtimeconfig.json': huge });
    const root = proc.rootOf(31);
    execFileSync('mkfifo', [join(root, 'app', 'B.runtimeconfig.json')]);
    // Outside the target's root, with a valid config: the link must be resolved inside the root, where it is missing.
    const outside = await proc.writeInRoot(32, '/elsewhere/C.runtimeconfig.json', sdkConfig);
    await symlink(outside, join(root, 'app', 'C.runtimeconfig.json'));
    const info = await inspectProcess(31, { procRoot: proc.root });
    assert.equal(info.runtime, 'dotnet');
    assert.equal(info.dotnet?.version, undefined);
  },
);

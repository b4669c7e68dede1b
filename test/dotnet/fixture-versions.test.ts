// The fixture app built for each .NET version (test/support/dotnet-app.ts): 8 and 9 self-contained, their runtime
// (libcoreclr.so, System.Private.CoreLib.dll) mapped from the app's own folder at the version the SDK wrote in the
// app's runtimeconfig.json; 10 on the SDK's shared framework. The first run restores 8's and 9's runtime packs.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { dotnetRuntimeFolder, dotnetVersions, startDotnetApp } from '../support/dotnet-app.js';
import { needDotnet } from '../support/requirements.js';

for (const version of dotnetVersions) {
  test(`the fixture runs on .NET ${version}, its runtime mapped from where the helper says`, async (t) => {
    if (!needDotnet(t)) return;
    const app = await startDotnetApp({ version, seconds: 30, workloads: ['generic'] });
    t.after(() => app.kill());
    const runtime = await dotnetRuntimeFolder(version);
    assert.ok(runtime, 'the runtime folder is known');
    const maps = await readFile(`/proc/${app.pid}/maps`, 'utf8');
    assert.ok(maps.includes(` ${join(runtime, 'libcoreclr.so')}\n`), `libcoreclr.so from ${runtime}:\n${maps}`);
    assert.ok(maps.includes(` ${join(runtime, 'System.Private.CoreLib.dll')}\n`), 'System.Private.CoreLib.dll too');
    if (version === 10) return;
    assert.equal(runtime, dirname(app.executable), 'self-contained: the runtime is in the app folder');
    const config = JSON.parse(await readFile(join(runtime, 'ProfcpuFixture.runtimeconfig.json'), 'utf8')) as {
      runtimeOptions: { tfm: string; includedFrameworks: { name: string; version: string }[] };
    };
    assert.equal(config.runtimeOptions.tfm, `net${version}.0`);
    assert.match(config.runtimeOptions.includedFrameworks[0]!.version, new RegExp(`^${version}\\.0\\.\\d+$`));
  });
}

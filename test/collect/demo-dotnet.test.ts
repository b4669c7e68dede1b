// The .NET demo workload's cache folder, and a build that fails: its error lines in the message, its output kept.
import assert from 'node:assert/strict';
import { cp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { buildDotnetDemo, defaultDemoCacheDir, demoDotnetSource } from '../../src/collect/demo-dotnet.js';
import { chooseTargetFramework, findDotnetHost, inspectDotnetHost } from '../../src/collect/dotnet-host.js';
import { isProfcpuError } from '../../src/error.js';
import { needDotnet } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

test('the cache folder is $XDG_CACHE_HOME/profcpu/demo, else ~/.cache/profcpu/demo', () => {
  assert.equal(defaultDemoCacheDir({ XDG_CACHE_HOME: '/var/cache/me' }, '/home/me'), '/var/cache/me/profcpu/demo');
  assert.equal(defaultDemoCacheDir({}, '/home/me'), '/home/me/.cache/profcpu/demo');
  // A relative XDG_CACHE_HOME is to be ignored, says the XDG specification.
  assert.equal(defaultDemoCacheDir({ XDG_CACHE_HOME: 'cache' }, '/home/me'), '/home/me/.cache/profcpu/demo');
});

test('a failed build names the compiler error, keeps the output and leaves no build behind', async (t) => {
  if (!needDotnet(t)) return;
  const work = await tempDir(t, 'demo-build', '/var/tmp');
  const source = join(work, 'source');
  await cp(demoDotnetSource, source, { recursive: true });
  await writeFile(join(source, 'Broken.cs'), 'namespace ProfcpuDemo; public static class Broken { int }\n');
  const host = (await findDotnetHost(process.env))!;
  const install = await inspectDotnetHost(host, { env: process.env, cwd: '/' });
  const framework = chooseTargetFramework(install);
  assert.ok(install.sdkVersion && framework, JSON.stringify(install));
  const cacheDir = join(work, 'cache');
  let building = 0;
  const error = await buildDotnetDemo({
    host,
    sdkVersion: install.sdkVersion,
    framework,
    cacheDir,
    env: process.env,
    sourceDir: source,
    onBuild: () => building++,
  }).catch((e: unknown) => e);
  assert.ok(isProfcpuError(error, 'BUILD_FAILED'), String(error));
  assert.equal(building, 1);
  assert.match(error.message, /Broken\.cs\(1,\d+\): error CS\d+/);
  assert.match(error.remedy ?? '', /last-failed-build\.log/);
  assert.match(await readFile(join(cacheDir, 'last-failed-build.log'), 'utf8'), /error CS\d+/);
  assert.deepEqual(await readdir(cacheDir), ['last-failed-build.log']);
});

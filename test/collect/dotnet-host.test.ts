// Finding `dotnet` (PATH first, then DOTNET_ROOT) and choosing the demo's target framework from what it holds.
import assert from 'node:assert/strict';
import { chmod, mkdir, writeFile } from 'node:fs/promises';
import { tempDir } from '../support/temp.js';
import { join } from 'node:path';
import { test } from 'node:test';
import {
  chooseTargetFramework,
  findDotnetHost,
  runtimesIn,
  type DotnetInstall,
} from '../../src/collect/dotnet-host.js';

test('runtimesIn reads the Microsoft.NETCore.App versions of `dotnet --list-runtimes`', () => {
  const text = [
    'Microsoft.AspNetCore.App 10.0.12 [/usr/share/dotnet/shared/Microsoft.AspNetCore.App]',
    'Microsoft.NETCore.App 8.0.22 [/usr/share/dotnet/shared/Microsoft.NETCore.App]',
    'Microsoft.NETCore.App 10.0.12 [/usr/share/dotnet/shared/Microsoft.NETCore.App]',
    'Microsoft.NETCore.App 11.0.0-preview.1.26070.1 [/usr/share/dotnet/shared/Microsoft.NETCore.App]',
  ].join('\n');
  assert.deepEqual(runtimesIn(text), ['8.0.22', '10.0.12', '11.0.0-preview.1.26070.1']);
  assert.deepEqual(runtimesIn(''), []);
});

test('chooseTargetFramework takes the newest .NET 8+ that the SDK can build and a runtime can run', () => {
  const install = (
    sdkVersion: string | undefined,
    runtimes: string[],
    targetingPacks: string[] = [],
  ): DotnetInstall => ({
    sdkVersion,
    runtimes,
    targetingPacks,
  });
  assert.equal(chooseTargetFramework(install('10.0.401', ['8.0.22', '10.0.12'], ['10.0.12'])), 'net10.0');
  // The SDK's own version needs no pack in packs/ (it carries it)...
  assert.equal(chooseTargetFramework(install('10.0.401', ['10.0.12'])), 'net10.0');
  // ...an older one does, as there may be no network to fetch it.
  assert.equal(chooseTargetFramework(install('10.0.401', ['8.0.22'], ['8.0.22'])), 'net8.0');
  assert.equal(chooseTargetFramework(install('10.0.401', ['8.0.22'])), undefined);
  // A runtime newer than the SDK cannot be built for; one older than 8 is not taken.
  assert.equal(chooseTargetFramework(install('9.0.100', ['9.0.1', '10.0.12'])), 'net9.0');
  assert.equal(chooseTargetFramework(install('8.0.100', ['7.0.20'], ['7.0.20'])), undefined);
  assert.equal(chooseTargetFramework(install(undefined, ['10.0.12'])), undefined);
});

test('findDotnetHost looks on PATH first, then in DOTNET_ROOT, and wants an executable', async (t) => {
  const root = await tempDir(t, 'dotnet-host', '/tmp');
  const place = async (dir: string, mode: number) => {
    await mkdir(dir, { recursive: true });
    await writeFile(join(dir, 'dotnet'), '#!/bin/sh\n');
    await chmod(join(dir, 'dotnet'), mode);
    return dir;
  };
  const onPath = await place(join(root, 'bin'), 0o755);
  const notExecutable = await place(join(root, 'plain'), 0o644);
  const dotnetRoot = await place(join(root, 'dotnet-root'), 0o755);
  const empty = join(root, 'empty');

  assert.deepEqual(await findDotnetHost({ PATH: `${notExecutable}:${onPath}`, DOTNET_ROOT: dotnetRoot }), {
    path: join(onPath, 'dotnet'),
    root: onPath,
    foundIn: 'PATH',
  });
  assert.deepEqual(await findDotnetHost({ PATH: empty, DOTNET_ROOT: dotnetRoot }), {
    path: join(dotnetRoot, 'dotnet'),
    root: dotnetRoot,
    foundIn: 'DOTNET_ROOT',
  });
  assert.equal(await findDotnetHost({ PATH: `${empty}:${notExecutable}` }), undefined);
  // Relative entries are not searched: they depend on the working directory.
  assert.equal(await findDotnetHost({ PATH: 'bin', DOTNET_ROOT: 'dotnet-root' }), undefined);
});

// The .NET fixture app (test/fixtures/dotnet-app) published as one composite ReadyToRun image: self-contained,
// trimmed, the app and the framework it keeps precompiled together into `ProfcpuFixture.r2r.dll`, beside the
// rewritten component assemblies whose metadata names its methods. Built once per source version into the test cache
// (about 20 s of CPU; the runtime pack, crossgen2 and the IL linker come from NuGet on the first build).
import { execFile } from 'node:child_process';
import { cp, mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildIntoCache, sourceHash } from './build-cache.js';
import { dotnetAppSource, dotnetBuildEnv, testCacheDir } from './dotnet-app.js';

const execFileAsync = promisify(execFile);
let built: Promise<string> | undefined;

/** Builds the composite fixture (once per test process, reused while the sources are unchanged); its executable. */
export function buildCompositeDotnetApp(): Promise<string> {
  built ??= buildOnce();
  return built;
}

async function buildOnce(): Promise<string> {
  const hash = await sourceHash(dotnetAppSource, /\.(cs|csproj)$/, { seed: 'composite-1', separator: '' });
  const finalDir = join(testCacheDir, `dotnet-composite-${hash}`);
  return buildIntoCache({ finalDir, executable: join(finalDir, 'app', 'ProfcpuFixture'), build });
}

async function build(workDir: string): Promise<void> {
  await mkdir(workDir, { recursive: true });
  // The fixture's own NuGet.config allows no package source; this build needs NuGet's (runtime pack, crossgen2).
  await cp(dotnetAppSource, join(workDir, 'src'), {
    recursive: true,
    filter: (path) => !path.endsWith('NuGet.config'),
  });
  await writeFile(
    join(workDir, 'src', 'NuGet.config'),
    '<configuration><packageSources><clear /><add key="nuget.org" value="https://api.nuget.org/v3/index.json" />' +
      '</packageSources></configuration>\n',
  );
  try {
    await execFileAsync(
      'dotnet',
      [
        'publish',
        join(workDir, 'src', 'ProfcpuFixture.csproj'),
        '-c',
        'Release',
        '-r',
        'linux-x64',
        '--self-contained',
        '-p:PublishTrimmed=true',
        '-p:PublishReadyToRun=true',
        '-p:PublishReadyToRunComposite=true',
        '-o',
        join(workDir, 'app'),
        '-nodeReuse:false',
        '-p:UseSharedCompilation=false',
      ],
      {
        env: dotnetBuildEnv(),
        maxBuffer: 16 << 20,
      },
    );
  } catch (error) {
    const out = (error as { stdout?: string }).stdout ?? '';
    throw new Error(`publishing the composite .NET fixture failed (it needs NuGet):\n${out.slice(-4000)}`, {
      cause: error,
    });
  }
}

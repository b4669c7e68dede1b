// The dump tests' independent reader (test/fixtures/clrmd-reader, built on ClrMD from NuGet): `buildClrmdReader()`
// builds it once per source version into the test cache (restoring Microsoft.Diagnostics.Runtime), and
// `readDump(path)` runs it on a core dump, giving its OS thread count and each managed thread's frames;
// `readStubHeaps(pid)` attaches it to a live process, giving the ranges of its stub heaps.
// Callers check for the SDK first: `needDotnet(t)`.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildIntoCache, sourceHash } from './build-cache.js';
import { dotnetBuildEnv, testCacheDir } from './dotnet-app.js';

const source = fileURLToPath(new URL('../fixtures/clrmd-reader', import.meta.url));
const execFileAsync = promisify(execFile);
let built: Promise<string> | undefined;

export interface DumpAsClrmdSees {
  osThreads: number;
  runtimeVersion: string;
  threads: { osId: number; managedId: number; alive: boolean; frames: string[] }[];
}

export function buildClrmdReader(): Promise<string> {
  built ??= buildOnce();
  return built;
}

async function buildOnce(): Promise<string> {
  const finalDir = join(testCacheDir, `clrmd-reader-${await sourceHash(source, /\.(cs|csproj)$/)}`);
  return buildIntoCache({
    finalDir,
    executable: join(finalDir, 'bin', 'ClrmdReader', 'release', 'ClrmdReader'),
    build,
  });
}

async function build(workDir: string): Promise<void> {
  try {
    await execFileAsync(
      'dotnet',
      [
        'build',
        join(source, 'ClrmdReader.csproj'),
        '-c',
        'Release',
        '--artifacts-path',
        workDir,
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
    throw new Error(`building the ClrMD reader failed:\n${out.slice(-4000)}`, { cause: error });
  }
}

/** What ClrMD reads in the dump at `path`. */
export async function readDump(path: string): Promise<DumpAsClrmdSees> {
  const reader = await buildClrmdReader();
  const { stdout } = await execFileAsync(reader, [path], {
    timeout: 120_000,
    maxBuffer: 64 << 20,
    env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1' },
  });
  return JSON.parse(stdout) as DumpAsClrmdSees;
}

/** The ranges of the stub heaps ClrMD finds in the live process `pid` (suspended while it reads). */
export async function readStubHeaps(pid: number): Promise<{ start: bigint; end: bigint }[]> {
  const reader = await buildClrmdReader();
  const { stdout } = await execFileAsync(reader, ['--stub-heaps', String(pid)], {
    timeout: 120_000,
    maxBuffer: 16 << 20,
    env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1' },
  });
  return (JSON.parse(stdout) as { start: string; end: string }[]).map((h) => ({
    start: BigInt(`0x${h.start}`),
    end: BigInt(`0x${h.end}`),
  }));
}

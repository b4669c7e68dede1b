// dotnet-trace (dotnet/diagnostics, a NuGet dotnet tool), the profiler the naming cross-check compares with:
// `installDotnetTrace()` installs a fixed version once into the test cache (`dotnet tool install --tool-path`, from
// the machine's NuGet sources: the first run needs NuGet, later ones nothing) and gives the executable's path.
// Tests check for the SDK first, then `needDotnetTrace(t)`.
import { execFile } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { TestContext } from 'node:test';
import { buildIntoCache } from './build-cache.js';
import { testCacheDir } from './dotnet-app.js';
import { need } from './requirements.js';

/** The version installed: one NuGet serves here, with `--profile dotnet-sampled-thread-time` for `collect`. */
export const dotnetTraceVersion = '10.0.750501';

const execFileAsync = promisify(execFile);
let installed: Promise<string> | undefined;

/**
 * dotnet-trace's path, installed; when it cannot be installed the test fails under CI=true or is skipped (`need`), and
 * this gives undefined (the caller returns at once).
 */
export async function needDotnetTrace(t: TestContext): Promise<string | undefined> {
  try {
    return await installDotnetTrace();
  } catch (error) {
    need(t, false, `dotnet-trace, which \`dotnet tool install\` could not get: ${(error as Error).message}`);
    return undefined;
  }
}

/** Installs dotnet-trace (once per test process, kept across runs); rejects with the tool's output when it fails. */
export function installDotnetTrace(): Promise<string> {
  installed ??= installOnce();
  return installed;
}

async function installOnce(): Promise<string> {
  const finalDir = join(testCacheDir, `dotnet-trace-${dotnetTraceVersion}`);
  return buildIntoCache({ finalDir, executable: join(finalDir, 'dotnet-trace'), build: install, verb: 'installing' });
}

async function install(workDir: string): Promise<void> {
  try {
    // From the cache folder, so no project's NuGet.config (the fixture's clears every source) is in the way.
    await execFileAsync(
      'dotnet',
      ['tool', 'install', 'dotnet-trace', '--tool-path', workDir, '--version', dotnetTraceVersion],
      {
        cwd: testCacheDir,
        env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' },
        maxBuffer: 16 << 20,
      },
    );
  } catch (error) {
    await rm(workDir, { recursive: true, force: true });
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(
      `dotnet tool install dotnet-trace --version ${dotnetTraceVersion} failed (it comes from NuGet):\n${stdout}${stderr}`,
      { cause: error },
    );
  }
}

/** Runs dotnet-trace with `args`; rejects with its output when it fails (2 minutes at most). */
export async function runDotnetTrace(dotnetTrace: string, args: readonly string[]): Promise<void> {
  try {
    await execFileAsync(dotnetTrace, args, {
      env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1' },
      maxBuffer: 16 << 20,
      timeout: 120_000,
    });
  } catch (error) {
    const { stdout = '', stderr = '' } = error as { stdout?: string; stderr?: string };
    throw new Error(`dotnet-trace ${args.join(' ')} failed:\n${stdout}${stderr}`, { cause: error });
  }
}

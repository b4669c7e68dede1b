// Tests that need something from the machine (perf, root, the .NET SDK, gcc, debuginfod...) call `need`, or one
// of the guards below for what many tests need (`canRecord`: root and perf; `needDotnet`: the .NET SDK).
// When it is missing: under CI=true the test fails with a message naming it; elsewhere it is skipped with that
// message.
import { execFileSync } from 'node:child_process';
import type { TestContext } from 'node:test';

export function have(command: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v "$1"`, 'sh', command], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function isRoot(): boolean {
  return process.getuid?.() === 0;
}

/**
 * Returns true when the requirement holds. Otherwise fails the test under CI=true, or skips it, and returns false
 * (the caller should return at once).
 */
export function need(t: TestContext, ok: boolean, what: string): boolean {
  if (ok) return true;
  if (process.env['CI'] === 'true') throw new Error(`this test needs ${what}, which is missing on this machine`);
  t.skip(`needs ${what}`);
  return false;
}

export function needCommand(t: TestContext, command: string, debianPackage?: string): boolean {
  return need(t, have(command), `\`${command}\`${debianPackage ? ` (Debian package ${debianPackage})` : ''}`);
}

export function needRoot(t: TestContext): boolean {
  return need(t, isRoot(), 'root (perf and namespaces)');
}

/** What recording with perf needs: root, then perf. */
export function canRecord(t: TestContext): boolean {
  return needRoot(t) && needCommand(t, 'perf', 'linux-perf');
}

/** The .NET SDK (`dotnet`), to build the fixtures; `purpose` ends the message ("to publish ..."). */
export function needDotnet(t: TestContext, purpose?: string): boolean {
  return need(t, have('dotnet'), `the .NET SDK (\`dotnet\`)${purpose ? ` ${purpose}` : ''}`);
}

// Tests that need something from the machine (perf, root, the .NET SDK, gcc, debuginfod...) call `need`.
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

// What a command does on a signal it can no longer wait on: shared by collect and dump.
import type { Reporter } from './reporter.js';

/**
 * Ends profcpu now, whatever is under way. Not process.exit(): it waits for libuv's threads, and one blocked in a
 * read that never returns (a hung FUSE file) would hold it for good. SIGKILL cannot be held; the exit code is lost
 * (137), so the reason is said first.
 */
export function exitNow(reporter: Reporter, name: NodeJS.Signals): never {
  reporter.warn(`${name} again: ending profcpu now`);
  process.kill(process.pid, 'SIGKILL');
  throw new Error('unreachable: SIGKILL sent to self');
}

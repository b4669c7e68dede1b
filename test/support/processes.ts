// Processes for tests to point at: `nonexistentPid()` gives a PID no process can have (one above the kernel's
// pid_max), for the paths that must fail cleanly on a target that is gone.
import { readFileSync } from 'node:fs';

/** A PID no process can have: one above the kernel's pid_max. */
export function nonexistentPid(): number {
  return Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8')) + 1;
}

// The attacker's FIFO: where profcpu might open a file, a FIFO with a writer blocked in its open until somebody opens
// it for reading. Opening it wakes the writer (as opening a device may act: a watchdog arms); a read of it never ends
// without a deadline. `opened()` says whether anybody opened it.
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { setTimeout } from 'node:timers/promises';

/**
 * A FIFO at `name` in a new folder (or at `name` itself when it is absolute), with a writer waiting in its open;
 * `opened()` says, after a while, whether anybody opened it (the writer left its open); `remove()` ends the writer and
 * removes the FIFO (and the folder).
 */
export async function watchedFifo(name = 'watchdog') {
  const dir = isAbsolute(name) ? undefined : mkdtempSync(join(tmpdir(), 'profcpu-fifo-'));
  const fifo = dir ? join(dir, name) : name;
  mkdirSync(dirname(fifo), { recursive: true });
  execFileSync('mkfifo', [fifo]);
  const writer = spawn('sh', ['-c', 'echo woken > "$1"', 'sh', fifo], { stdio: 'ignore' });
  // Once the writer waits in its open (wchan wait_for_partner), an open for reading wakes it.
  while ((await readFile(`/proc/${writer.pid}/wchan`, 'utf8')) !== 'wait_for_partner') await setTimeout(10);
  return {
    dir: dir ?? dirname(fifo),
    fifo,
    async opened(): Promise<boolean> {
      // A woken writer leaves its open at once (it ends, or waits to write): give it time to.
      await setTimeout(200);
      return (await readFile(`/proc/${writer.pid}/wchan`, 'utf8').catch(() => 'ended')) !== 'wait_for_partner';
    },
    remove(): void {
      writer.kill('SIGKILL');
      rmSync(dir ?? fifo, { recursive: true, force: true });
    },
  };
}

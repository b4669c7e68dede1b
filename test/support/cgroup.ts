// A cgroup v2 of its own for a test's target, as a container or a systemd service would have: with it, collect can
// record the target's cgroup where perf spins on exited threads (src/perf/record-scope.ts).
import { mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TestContext } from 'node:test';
import { cgroupMounts } from '../../src/perf/record-scope.js';

let count = 0;

/**
 * Moves `pids` into a new cgroup v2, removed after the test (once its processes are gone). Gives the cgroup's folder,
 * or undefined where cgroup v2 is not mounted, a v1 perf_event hierarchy is (perf would use that), or we may not.
 */
export async function ownCgroup(t: TestContext, ...pids: number[]): Promise<string | undefined> {
  const mounts = cgroupMounts(await readFile('/proc/self/mountinfo', 'utf8').catch(() => ''));
  if (!mounts.v2 || mounts.perfEventV1) return undefined;
  const dir = join(mounts.v2, `profcpu-test-${process.pid}-${++count}`);
  try {
    await mkdir(dir);
    for (const pid of pids) await writeFile(join(dir, 'cgroup.procs'), String(pid));
  } catch {
    await rmdir(dir).catch(() => undefined);
    return undefined;
  }
  t.after(async () => {
    // rmdir fails while a process is still in it: give the test's own kill a moment.
    for (
      let i = 0;
      i < 20 &&
      (await rmdir(dir).then(
        () => false,
        () => true,
      ));
      i++
    )
      await sleep(100);
  });
  return dir;
}

// Temporary folders for tests: `tempDir(t, name)` makes `<parent>/profcpu-<name>-XXXXXX` (parent: the OS's temporary
// folder unless given, e.g. /var/tmp for what should not be on a tmpfs) and removes it, with all it holds, once the
// test `t` ends.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** What `tempDir` needs of a test: somewhere to register the folder's removal (a TestContext will do). */
export interface AfterTest {
  after(fn: () => Promise<void>): void;
}

export async function tempDir(t: AfterTest, name: string, parent = tmpdir()): Promise<string> {
  const dir = await mkdtemp(join(parent, `profcpu-${name}-`));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

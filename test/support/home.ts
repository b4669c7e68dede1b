// A HOME of the test's own: perf and the built-in engine look in $HOME/.debug (perf's build-id cache), which perf record
// fills on this machine. A test that must not see it, or that lays out a cache of its own, takes an empty HOME, which
// is set for the rest of the test and restored and removed after it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestContext } from 'node:test';

export async function ownHome(t: TestContext): Promise<string> {
  const home = await mkdtemp(join(tmpdir(), 'profcpu-test-home-'));
  const saved = process.env['HOME'];
  process.env['HOME'] = home;
  t.after(async () => {
    process.env['HOME'] = saved;
    await rm(home, { recursive: true, force: true });
  });
  return home;
}

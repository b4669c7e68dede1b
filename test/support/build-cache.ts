// Building a test fixture once into the test cache, shared by concurrent test processes and later runs:
// `buildIntoCache({ finalDir, executable, build })` gives `executable` (a path inside `finalDir`) at once when it is
// there; otherwise `build(workDir)` writes into a folder beside `finalDir`, which is then renamed into place, so no
// process ever sees a half-written build. `sourceHash(dir, pattern)` names a build after its sources.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export interface CacheBuild {
  /** The folder the finished build is renamed to. */
  finalDir: string;
  /** The file in `finalDir` whose presence means the build is done; what `buildIntoCache` gives. */
  executable: string;
  /** Writes the build into `workDir` (absent when called); rejects when the build fails. */
  build(workDir: string): Promise<void>;
  /** The folder built in is `<finalDir>.<verb>-<pid>` (default 'building'). */
  verb?: string;
}

export async function buildIntoCache({ finalDir, executable, build, verb = 'building' }: CacheBuild): Promise<string> {
  if (existsSync(executable)) return executable;
  await mkdir(dirname(finalDir), { recursive: true });
  const workDir = `${finalDir}.${verb}-${process.pid}`;
  await rm(workDir, { recursive: true, force: true });
  await build(workDir);
  try {
    await rename(workDir, finalDir);
  } catch (error) {
    // Another test process finished first: its build is of the same sources.
    if (!existsSync(executable)) throw error;
    await rm(workDir, { recursive: true, force: true });
  }
  return executable;
}

/**
 * 16 hex digits of a SHA-256 over `seed`, then the name and content of each file of `dir` matching `pattern`, in
 * name order, each name followed by `separator` (default NUL). Seed and separator only keep existing cache names.
 */
export async function sourceHash(
  dir: string,
  pattern: RegExp,
  { seed = '', separator = '\0' }: { seed?: string; separator?: string } = {},
): Promise<string> {
  const hash = createHash('sha256').update(seed);
  for (const name of (await readdir(dir)).filter((n) => pattern.test(n)).sort())
    hash
      .update(name)
      .update(separator)
      .update(await readFile(join(dir, name)));
  return hash.digest('hex').slice(0, 16);
}

// A PATH like the test's own but without one command: every folder of PATH that holds it is replaced by a folder of
// links to its other entries. For tests of what profcpu does when a tool (say `dotnet`) is not installed.
import { mkdir, readdir, symlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/** Lays the link folders out under `dir` (which the caller removes) and gives the PATH. */
export async function pathWithout(command: string, dir: string, path = process.env['PATH'] ?? ''): Promise<string> {
  const entries: string[] = [];
  for (const [i, entry] of path.split(delimiter).entries()) {
    if (!existsSync(join(entry, command))) {
      entries.push(entry);
      continue;
    }
    const links = join(dir, `path-${i}`);
    await mkdir(links, { recursive: true });
    for (const name of await readdir(entry)) if (name !== command) await symlink(join(entry, name), join(links, name));
    entries.push(links);
  }
  return entries.join(delimiter);
}

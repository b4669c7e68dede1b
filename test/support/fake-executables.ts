// Fake executables standing in for real ones (perf, mostly): shell scripts written into a temporary folder that
// lives as long as the test file. `scratch.dir` is that folder, for other files the test needs.
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';

export interface Scratch {
  /** The folder, set once the file's `before` hook has run. */
  readonly dir: string;
  /** Writes an executable `#!/bin/sh` script with this body; gives its path. */
  executable(name: string, body: string): Promise<string>;
}

/** Registers before/after hooks making and removing the folder; call at the top level of a test file. */
export function scratchFolder(prefix: string): Scratch {
  let dir = '';
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), `profcpu-${prefix}-`));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });
  return {
    get dir() {
      return dir;
    },
    async executable(name, body) {
      const path = join(dir, name);
      await writeFile(path, `#!/bin/sh\n${body}\n`);
      await chmod(path, 0o755);
      return path;
    },
  };
}

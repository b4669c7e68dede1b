// A recording without build-ids (perf record -B, which collect uses when the target maps files from a FUSE or network
// file system) names no build-id: the built-in engine then takes a file's build-id from binaries.json by its path and
// names its frames from the binary collect kept, never from another file that has the same path on this machine.
import assert from 'node:assert/strict';
import { copyFile, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { layout } from '../../src/output/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { readElfFile } from '../../src/formats/elf/elf.js';
import { canRecord, needCommand } from '../support/requirements.js';
import { recordCommand } from '../postprocess/recording.js';
import { tempDir } from '../support/temp.js';

const program = (name: string) => `
#include <stdlib.h>
volatile unsigned long sink;
__attribute__((noinline)) void ${name}(void) { for (unsigned long n = 0; n < 400000000UL; n++) sink += n; }
int main(void) { ${name}(); return 0; }
`;

test('a recording without build-ids names the kept binary’s frames from it, not from the local file at its path', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const work = await tempDir(t, 'kept-by-path');
  const app = join(work, 'app');
  const build = async (name: string, to: string) => {
    await writeFile(`${to}.c`, program(name));
    await execa('gcc', ['-O1', '-g0', '-fno-omit-frame-pointer', '-Wl,--build-id', '-o', to, `${to}.c`]);
  };
  await build('kept_function', app);
  const out = join(work, 'out');
  await mkdir(join(out, 'target', 'binaries'), { recursive: true });
  await recordCommand(join(out, 'perf.data'), [app], ['-B', '-N']);
  // What collect kept: the file under its build-id, and the index.
  const buildId = (await readElfFile(app)).buildId!;
  await copyFile(app, join(out, 'target', 'binaries', buildId));
  const bytes = (await stat(app)).size;
  await writeFile(
    join(out, layout.binariesIndex),
    JSON.stringify({ binaries: [{ path: app, buildId, bytes, storedBytes: bytes }] }),
  );
  // Another program at the same path here, its function at the same address under another name.
  await build('local_impostor', join(work, 'other'));
  await copyFile(join(work, 'other'), app);
  await postprocess(out, { engine: 'native', tarball: false });
  const folded = await readFile(join(out, layout.foldedStacks), 'utf8');
  assert.match(folded, /kept_function/);
  assert.doesNotMatch(folded, /local_impostor/);
});

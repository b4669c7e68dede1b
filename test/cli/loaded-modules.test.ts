// What the built CLI loads to post-process with the native engine: not the code only the perf engine or an archive
// needs (execa, node-tar's parser), whose compiling cost every run 25 ms. A module hook records every file the run
// loads; the bundle's chunks name the packages they hold in comments (`// node_modules/execa/...`). The perf engine's
// run, which does load execa, shows that the hook sees it.
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { cliPath, repoRoot } from '../support/cli.js';
import { needCommand, needRoot } from '../support/requirements.js';
import { recordCommand } from '../postprocess/recording.js';

const hooks = `
import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.PROFCPU_TEST_LOAD_LOG, url + '\\n');
  return next(url, context);
}
`;

/** The bundle's files a postprocess run loads, and the packages their comments say they hold. */
async function loadedPackages(dir: string, scratch: string, engine: 'native' | 'perf') {
  const log = join(scratch, `${engine}.log`);
  await writeFile(log, '');
  await execa(
    process.execPath,
    [
      '--import',
      pathToFileURL(join(scratch, 'register.mjs')).href,
      cliPath,
      'postprocess',
      '--dir',
      dir,
      '--engine',
      engine,
      '--no-tarball',
      '-q',
    ],
    { env: { PROFCPU_TEST_LOAD_LOG: log } },
  );
  const files = (await readFile(log, 'utf8'))
    .split('\n')
    .filter((url) => url.startsWith('file:'))
    .map((url) => fileURLToPath(url))
    .filter((path) => path.startsWith(join(repoRoot, 'dist')));
  const packages = new Set<string>();
  for (const file of files)
    for (const [, path] of (await readFile(file, 'utf8')).matchAll(/^\/\/ node_modules\/(\S+)$/gm)) packages.add(path!);
  return { files, packages: [...packages] };
}

test('postprocess --engine native loads neither execa nor node-tar’s parser; --engine perf loads execa', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf')) return;
  const scratch = await mkdtemp(join(tmpdir(), 'profcpu-loaded-'));
  t.after(() => rm(scratch, { recursive: true, force: true }));
  await writeFile(join(scratch, 'hooks.mjs'), hooks);
  await writeFile(
    join(scratch, 'register.mjs'),
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(scratch, 'hooks.mjs')).href)});\n`,
  );
  const dir = join(scratch, 'recording');
  await mkdir(dir);
  await recordCommand(join(dir, 'perf.data'), ['sh', '-c', 'dd if=/dev/zero of=/dev/null bs=4k count=100000']);

  const native = await loadedPackages(dir, scratch, 'native');
  assert.ok(
    native.files.some((file) => file.endsWith('main.js')),
    native.files.join('\n'),
  );
  const execaFiles = (packages: string[]) => packages.filter((path) => path.startsWith('execa/'));
  assert.deepEqual(execaFiles(native.packages), []);
  assert.deepEqual(
    // The whole package (its entry point is one minified file) or its reading side.
    native.packages.filter(
      (path) => path.startsWith('tar/') && /\/(index(\.min)?|parse|unpack|extract)\.js$/.test(path),
    ),
    [],
  );
  // The archive writer's part of node-tar is there (prof.tar.gz is written by default), as is yargs.
  assert.ok(
    native.packages.some((path) => path.endsWith('tar/dist/esm/header.js')),
    native.packages.join('\n'),
  );
  assert.ok(
    native.packages.some((path) => path.startsWith('yargs/')),
    native.packages.join('\n'),
  );

  const perf = await loadedPackages(dir, scratch, 'perf');
  assert.notDeepEqual(execaFiles(perf.packages), [], perf.packages.join('\n'));
});

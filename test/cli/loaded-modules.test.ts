// What the built CLI loads to post-process with the built-in engine: not the code only the perf engine or an archive
// needs (execa, node-tar's parser), whose compiling cost every run 25 ms. A module hook records every file the run
// loads; the bundle's chunks name the packages they hold in comments (`// node_modules/execa/...`), and a package
// loaded unbundled shows in its path. The recording is a folder of the perf corpus (test/fixtures/perf-corpus/), as
// collect lays it out. The perf engine's run, which does load execa, shows that the hook sees it.
import assert from 'node:assert/strict';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { execa } from 'execa';
import { extract } from 'tar';
import { cliPath, repoRoot } from '../support/cli.js';
import { needCommand } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

const corpus = fileURLToPath(new URL('../fixtures/perf-corpus/', import.meta.url));

const hooks = `
import { appendFileSync } from 'node:fs';
export async function load(url, context, next) {
  appendFileSync(process.env.PROFCPU_TEST_LOAD_LOG, url + '\\n');
  return next(url, context);
}
`;

/** A recording to post-process, and the module hook's files, in a scratch folder removed after the test. */
async function setUp(t: { after(fn: () => Promise<void>): void }) {
  const scratch = await tempDir(t, 'loaded');
  await writeFile(join(scratch, 'hooks.mjs'), hooks);
  await writeFile(
    join(scratch, 'register.mjs'),
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(scratch, 'hooks.mjs')).href)});\n`,
  );
  await extract({ file: join(corpus, 'native-perf6.1.tar.gz'), cwd: scratch });
  return { scratch, dir: join(scratch, 'native-perf6.1', 'recording') };
}

/** The files of the repository a postprocess run loads, and the packages they are or hold (`execa/lib/...`). */
async function loadedPackages(scratch: string, dir: string, engine: 'native' | 'perf') {
  const log = join(scratch, `${engine}.log`);
  await writeFile(log, '');
  await execa(
    process.execPath,
    [
      ...['--import', pathToFileURL(join(scratch, 'register.mjs')).href, cliPath],
      ...['postprocess', '--dir', dir, '--engine', engine, '-q'],
    ],
    { env: { PROFCPU_TEST_LOAD_LOG: log } },
  );
  const files = (await readFile(log, 'utf8'))
    .split('\n')
    .filter((url) => url.startsWith('file:'))
    .map((url) => fileURLToPath(url))
    .filter((path) => path.startsWith(repoRoot));
  const packages = new Set<string>();
  for (const file of files) {
    const unbundled = /\/node_modules\/(.+)$/.exec(file);
    if (unbundled) packages.add(unbundled[1]!);
    else
      for (const [, path] of (await readFile(file, 'utf8')).matchAll(/^\/\/ node_modules\/(\S+)$/gm))
        packages.add(path!);
  }
  return { files, packages: [...packages] };
}

const execaFiles = (packages: string[]) => packages.filter((path) => path.startsWith('execa/'));

test('postprocess --engine native loads neither execa nor node-tar’s parser', async (t) => {
  const { scratch, dir } = await setUp(t);
  // The default run: prof.tar.gz written too.
  const native = await loadedPackages(scratch, dir, 'native');
  assert.ok(
    native.files.some((file) => file === join(repoRoot, 'dist/cli/main.js')),
    native.files.join('\n'),
  );
  assert.deepEqual(execaFiles(native.packages), []);
  assert.deepEqual(
    // The whole package (its entry point is one minified file) or its reading side.
    native.packages.filter(
      (path) => path.startsWith('tar/') && /\/(index(\.min)?|parse|unpack|extract)\.js$/.test(path),
    ),
    [],
  );
  // The archive writer's part of node-tar is there, as is yargs: the hook sees the packages loaded.
  assert.ok(
    native.packages.some((path) => path.endsWith('tar/dist/esm/header.js')),
    native.packages.join('\n'),
  );
  assert.ok(
    native.packages.some((path) => path.startsWith('yargs/')),
    native.packages.join('\n'),
  );
});

test('postprocess --engine perf loads execa: the hook sees it', async (t) => {
  if (!needCommand(t, 'perf', 'linux-perf')) return;
  const { scratch, dir } = await setUp(t);
  const perf = await loadedPackages(scratch, dir, 'perf');
  assert.notDeepEqual(execaFiles(perf.packages), [], perf.packages.join('\n'));
});

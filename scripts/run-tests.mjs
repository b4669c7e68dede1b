#!/usr/bin/env node
// Runs the test suite with Node's own runner (TypeScript through tsx). Builds first, because end-to-end tests
// run the built CLI. Arguments narrow the run to files under the given paths: `npm test -- test/stacks`.
// PROFCPU_TEST_NO_BUILD=1 skips the build.
import { execFileSync, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

function collect(path, out) {
  const stat = statSync(path);
  if (stat.isFile()) {
    if (/\.test\.ts$/.test(path)) out.push(path);
    return out;
  }
  for (const name of readdirSync(path).sort()) {
    if (name === 'node_modules' || name === 'fixtures') continue;
    collect(join(path, name), out);
  }
  return out;
}

const roots = process.argv.slice(2).filter((a) => !a.startsWith('-'));
const flags = process.argv.slice(2).filter((a) => a.startsWith('-'));
const files = (roots.length ? roots : ['test'])
  .flatMap((r) => collect(join(root, r), []))
  .map((f) => relative(root, f));
if (files.length === 0) {
  console.error('run-tests: no test files found');
  process.exit(1);
}
if (!process.env.PROFCPU_TEST_NO_BUILD)
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: root, stdio: 'inherit' });

const result = spawnSync(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...flags, ...files], {
  cwd: root,
  stdio: 'inherit',
});
process.exitCode = result.status ?? 1;

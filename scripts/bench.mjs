#!/usr/bin/env node
// `npm run bench [name...]`: runs the benchmark scripts in scripts/bench/ (all, or those named), each printing
// its own figures. Benchmarks are never part of `npm test`. Arguments from the first flag on go to the scripts
// (`npm run bench naming -- --app aspnet`).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = process.argv.slice(2);
const firstFlag = args.findIndex((a) => a.startsWith('-'));
const wanted = firstFlag < 0 ? args : args.slice(0, firstFlag);
const passed = firstFlag < 0 ? [] : args.slice(firstFlag);
const scripts = readdirSync(`${root}/scripts/bench`)
  .filter((f) => /\.(mjs|ts)$/.test(f))
  .filter((f) => wanted.length === 0 || wanted.some((w) => f.startsWith(w)))
  .sort();
for (const script of scripts) {
  console.log(`\n== ${script}`);
  const run = script.endsWith('.ts') ? ['--import', 'tsx', `scripts/bench/${script}`] : [`scripts/bench/${script}`];
  const r = spawnSync(process.execPath, [...run, ...passed], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exitCode = 1;
}

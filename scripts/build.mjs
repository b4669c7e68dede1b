#!/usr/bin/env node
// Builds profcpu: TypeScript to dist/ (tsc), then the offline flame-graph viewer bundle into assets/.
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const run = (cmd, args) => execFileSync(cmd, args, { cwd: root, stdio: 'inherit' });

run(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json']);
chmodSync(`${root}/dist/cli/main.js`, 0o755);
if (existsSync(`${root}/scripts/build-viewer.mjs`)) run(process.execPath, ['scripts/build-viewer.mjs']);

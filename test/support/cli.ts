// Runs the built CLI (dist/cli/main.js) the way a user would, capturing its output.
import { execa, type Options } from 'execa';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const cliPath = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export async function runCli(args: readonly string[], options: Options = {}) {
  return execa(process.execPath, [cliPath, ...args], { reject: false, all: true, ...options });
}

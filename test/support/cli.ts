// Runs the built CLI (dist/cli/main.js) the way a user would, capturing its output.
import { execa } from 'execa';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));
export const cliPath = fileURLToPath(new URL('../../dist/cli/main.js', import.meta.url));

export interface RunCliOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  input?: string | Uint8Array;
  inputFile?: string;
  timeout?: number;
}

export async function runCli(args: readonly string[], options: RunCliOptions = {}) {
  return execa(process.execPath, [cliPath, ...args], { reject: false, all: true, ...options });
}

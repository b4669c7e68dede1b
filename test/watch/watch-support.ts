// Running `profcpu watch` in tests: the built CLI started in the background, its log lines awaited one by one, and the
// run folder's index read back.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { TestContext } from 'node:test';
import { cliPath } from '../support/cli.js';
import type { RunEntry } from '../../src/watch/run-index.js';

export const burnWhileScript = new URL('../fixtures/node-burn/burn-while.mjs', import.meta.url).pathname;

export interface RunningWatch {
  child: ChildProcess;
  dir: string;
  /** Everything written to stderr so far. */
  log(): string;
  /** Resolves with the first log match at or after `from` (an offset in log()); rejects after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number, from?: number): Promise<RegExpExecArray>;
  /** Resolves with the exit code once the watch ended. */
  exited: Promise<number | null>;
  index(): Promise<RunEntry[]>;
}

export function startWatch(t: TestContext, dir: string, args: readonly string[]): RunningWatch {
  const child = spawn(
    process.execPath,
    [cliPath, 'watch', '--output', dir, '--symbols', 'none', '--offline', '--poll', '0.5', ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let text = '';
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  t.after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  const waitFor = (pattern: RegExp, timeoutMs = 120_000, from = 0) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(text.slice(from));
        if (match) {
          done();
          resolve(match);
        }
      };
      const timer = setTimeout(() => {
        done();
        reject(new Error(`no ${pattern} in the watch's log within ${timeoutMs} ms:\n${text}`));
      }, timeoutMs);
      const onClose = () => {
        done();
        reject(new Error(`the watch ended before ${pattern}:\n${text}`));
      };
      const done = () => {
        clearTimeout(timer);
        child.stderr!.off('data', check);
        child.off('close', onClose);
      };
      child.stderr!.on('data', check);
      child.once('close', onClose);
      check();
    });
  return {
    child,
    dir,
    log: () => text,
    waitFor,
    exited,
    index: async () => (JSON.parse(await readFile(join(dir, 'index.json'), 'utf8')) as { runs: RunEntry[] }).runs,
  };
}

/** Log lines matching `pattern`. */
export function lines(log: string, pattern: RegExp): string[] {
  return log.split('\n').filter((l) => pattern.test(l));
}

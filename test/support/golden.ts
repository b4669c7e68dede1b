// Golden files: compares a test's output with the file at `path`, or writes it there when PROFCPU_BLESS=1 (then
// review the diff before committing). A missing golden file fails with the command that writes it.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';

export const blessing = process.env['PROFCPU_BLESS'] === '1';

export function assertGolden(path: string, actual: string, message = ''): void {
  if (blessing) {
    writeFileSync(path, actual);
    return;
  }
  if (!existsSync(path))
    assert.fail(`golden file ${path} is missing: run the test with PROFCPU_BLESS=1 to write it, then review it`);
  assert.equal(
    actual,
    readFileSync(path, 'utf8'),
    `${message}output differs from ${path} (PROFCPU_BLESS=1 rewrites it)`,
  );
}

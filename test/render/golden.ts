// Golden files for render tests: compares output with test/render/fixtures/<name>, or writes it there when
// PROFCPU_BLESS=1.
import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));

export function readFixture(name: string): string {
  return readFileSync(`${fixtures}${name}`, 'utf8');
}

export function assertGolden(name: string, actual: string): void {
  const path = `${fixtures}${name}`;
  if (process.env['PROFCPU_BLESS'] === '1' || !existsSync(path)) {
    if (process.env['PROFCPU_BLESS'] !== '1')
      assert.fail(`golden file ${path} is missing: run the test with PROFCPU_BLESS=1 to write it, then review it`);
    writeFileSync(path, actual);
    return;
  }
  assert.equal(actual, readFileSync(path, 'utf8'), `output differs from ${path} (PROFCPU_BLESS=1 rewrites it)`);
}

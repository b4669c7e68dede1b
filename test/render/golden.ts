// Render fixtures (test/render/fixtures/): inputs read by name, and golden outputs compared by name through
// test/support/golden.ts (PROFCPU_BLESS=1 rewrites them).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { assertGolden as assertGoldenAt } from '../support/golden.js';

export const fixtures = fileURLToPath(new URL('./fixtures/', import.meta.url));

export function readFixture(name: string): string {
  return readFileSync(`${fixtures}${name}`, 'utf8');
}

export function assertGolden(name: string, actual: string): void {
  assertGoldenAt(`${fixtures}${name}`, actual);
}

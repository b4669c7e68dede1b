// The vdso step: this kernel's vDSO image kept in target/vdso, whole, an ELF file whose symbols name the vdso's
// functions (the built-in engine's names for [vdso] frames: test/engine/engines.test.ts).
import assert from 'node:assert/strict';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import type { StepContext } from '../../src/step/step.js';
import { vdsoStep } from '../../src/kernel/vdso-step.js';
import { bytesSource, readElf } from '../../src/formats/elf/elf.js';
import { readFunctionTable } from '../../src/formats/elf/elf-functions.js';
import { tempDir } from '../support/temp.js';

test('the vdso is kept, with its build-id, and its symbols name clock_gettime', async (t) => {
  const dir = await tempDir(t, 'vdso');
  await mkdir(join(dir, 'target'));
  const context = { dir, procRoot: '/proc', signal: new AbortController().signal } as StepContext;
  const report = await vdsoStep().afterRecording!(context);
  assert.equal(report?.['kept'], true);
  const image = await readFile(join(dir, layout.vdso));
  assert.equal(report?.['bytes'], image.length);
  const source = bytesSource(image);
  assert.equal(report?.['buildId'], (await readElf(source, '[vdso]')).buildId);
  const table = await readFunctionTable(source);
  assert.ok(table.size > 0);
  const names = new Set<string>();
  for (let offset = 0n; offset < BigInt(image.length); offset += 4n) {
    const name = table.lookup(offset)?.name;
    if (name) names.add(name);
  }
  assert.ok(names.has('__vdso_clock_gettime'), [...names].join(' '));
});

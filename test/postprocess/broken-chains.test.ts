// Call chains that stop short of a thread's start, counted: a program and its library built without frame pointers,
// recorded with frame-pointer call chains (`perf record -g`), lose their callers; the same built with frame pointers
// keep them. manifest.json's naming.brokenChains says how many samples, brokenChainsByFile where they stopped.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { basename, join } from 'node:path';
import { test } from 'node:test';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { buildCfiStack } from '../fixtures/cfi-stack/build.js';
import { canRecord, needCommand } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

async function brokenChains(dir: string, framePointers: boolean) {
  const { program, library } = buildCfiStack(dir, { framePointers });
  execFileSync('perf', ['record', '-q', '-g', '-F', '999', '-o', join(dir, 'perf.data'), '--', program, '1'], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const { manifest } = await postprocess(dir, { tarball: false, engine: 'native' });
  const naming = manifest.naming as {
    samples: number;
    brokenChains: number;
    brokenChainsByFile: Record<string, number>;
  };
  return { ...naming, files: [basename(program), basename(library)] };
}

test('frame-pointer call chains through code without frame pointers: broken chains counted by file', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'gcc', 'gcc')) return;
  const without = await brokenChains(await tempDir(t, 'chains-nofp', '/var/tmp'), false);
  const withFp = await brokenChains(await tempDir(t, 'chains-fp', '/var/tmp'), true);
  t.diagnostic(
    `without frame pointers: ${without.brokenChains} of ${without.samples} ${JSON.stringify(without.brokenChainsByFile)}`,
  );
  t.diagnostic(
    `with frame pointers: ${withFp.brokenChains} of ${withFp.samples} ${JSON.stringify(withFp.brokenChainsByFile)}`,
  );
  assert.ok(without.brokenChains > without.samples / 2, 'most chains break without frame pointers');
  // Each counted where its known chain ends: the fixture's own files, or libc's leaf functions it calls.
  assert.deepEqual(
    Object.keys(without.brokenChainsByFile).filter((file) => ![...without.files, 'libc.so.6'].includes(file)),
    [],
  );
  assert.equal(
    Object.values(without.brokenChainsByFile).reduce((a, b) => a + b, 0),
    without.brokenChains,
  );
  assert.ok(withFp.brokenChains < withFp.samples / 10, 'with frame pointers, few do');
});

// The collect session's contract with the code around it: steps run before and after recording and a failing step
// is a warning, postprocess gets the folder and the collect entry for the manifest, target.json is written.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { ProfcpuError } from '../../src/error.js';
import { collect, type CollectPhase } from '../../src/collect/session.js';
import type { CollectStep } from '../../src/step/step.js';
import { startNodeBurn } from '../fixtures/node-burn/node-burn.js';
import { canRecord, needRoot } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

test('steps run around the recording, a failing one only warns, and postprocess gets the collect entry', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'session', '/var/tmp');
  const node = await startNodeBurn(60);
  t.after(() => node.kill());

  const order: string[] = [];
  const phases: CollectPhase[] = [];
  const warnings: string[] = [];
  const recorder: CollectStep = {
    name: 'recorder',
    beforeRecording: async ({ target }) => {
      order.push(`before ${target.pid}`);
      return { seen: target.runtime };
    },
    afterRecording: async () => {
      order.push('after');
      return { done: true };
    },
  };
  const failing: CollectStep = {
    name: 'failing',
    beforeRecording: () => Promise.reject(new ProfcpuError('IPC_UNREACHABLE', 'no socket', { remedy: 'set X' })),
  };
  let postprocessed: { dir: string; extra: Record<string, unknown> | undefined } | undefined;
  const dir = join(work, 'out');
  const result = await collect(
    { pid: node.pid, durationSeconds: 1, output: dir },
    {
      steps: [recorder, failing],
      warn: (m) => warnings.push(m),
      onPhase: (p) => phases.push(p),
      postprocess: async (folder, _options, context) => {
        postprocessed = { dir: folder, extra: context.manifestExtra };
        return 'post-processed';
      },
    },
  );
  assert.deepEqual(order, [`before ${node.pid}`, 'after']);
  assert.deepEqual(phases, ['target', 'preflight', 'before-recording', 'recording', 'after-recording', 'postprocess']);
  assert.ok(warnings.includes('failing: no socket (fix: set X)'), warnings.join('\n'));
  // The built-in step that keeps the sampled binaries in the folder, for naming after the target exits, runs first.
  // So do the ones that keep the kernel's symbols and vDSO (test/kernel/kallsyms-step.test.ts, vdso-step.test.ts).
  const { binaries, kallsyms, vdso, ...given } = result.steps as Record<string, unknown> & {
    binaries: { binaries: { path: string }[] };
    kallsyms: { kept: boolean };
    vdso: { kept: boolean };
  };
  assert.equal(typeof kallsyms.kept, 'boolean');
  assert.equal(vdso.kept, true);
  await stat(join(dir, layout.vdso));
  assert.deepEqual(given, {
    recorder: { seen: 'node', done: true },
    failing: { beforeRecordingError: 'no socket' },
  });
  assert.ok(
    binaries.binaries.some((b) => b.path.endsWith('/node')),
    JSON.stringify(binaries),
  );
  assert.equal(result.postprocess, 'post-processed');
  assert.equal(postprocessed?.dir, dir);
  const entry = postprocessed?.extra?.['collect'] as { record: { end: string }; phaseMs: Record<string, number> };
  assert.equal(entry.record.end, 'duration');
  assert.ok(entry.phaseMs['recording']! > 0);
  assert.ok(result.recordedSeconds >= 1 && result.recordedSeconds < 5, String(result.recordedSeconds));
  assert.ok(result.cpuMs.profcpu >= 0);

  const targetJson = JSON.parse(await readFile(join(dir, layout.targetInfo), 'utf8')) as Record<string, unknown>;
  assert.equal(targetJson['pid'], node.pid);
  assert.equal(targetJson['nspid'], node.pid);
  assert.equal(targetJson['runtime'], 'node');
  assert.equal(targetJson['environ'], undefined, 'the environment (secrets) is never written');
});

test('an aborted session stops before recording and says how to finish the folder', async (t) => {
  if (!needRoot(t)) return;
  const node = await startNodeBurn(60);
  t.after(() => node.kill());
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(
    collect({ pid: node.pid, output: '/var/tmp/profcpu-never' }, { signal: controller.signal }),
    (error) => {
      assert.ok(error instanceof ProfcpuError && error.code === 'ABORTED');
      assert.match(error.remedy ?? '', /profcpu postprocess --dir/);
      return true;
    },
  );
});

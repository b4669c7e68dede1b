import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { PerfError } from '../../src/perf/exec.js';
import { perfScript, perfScriptArgs } from '../../src/perf/script.js';
import { scratchFolder } from '../support/fake-executables.js';
import { canRecord } from '../support/requirements.js';
import { burnFunctions, recordNode } from '../postprocess/recording.js';

const scratch = scratchFolder('script');
const fakePerf = (name: string, body: string) => scratch.executable(name, body);

test('the argv: header kept, inline resolution off, -f and extra arguments on request', () => {
  assert.deepEqual(perfScriptArgs('perf.data'), ['script', '-i', 'perf.data', '--header', '--no-inline']);
  assert.deepEqual(perfScriptArgs('p', { force: true, extraArgs: ['--pid', '3'] }), [
    'script',
    '-i',
    'p',
    '--header',
    '--no-inline',
    '-f',
    '--pid',
    '3',
  ]);
});

test('a slow sink gets every byte, in order (perf waits for it)', async () => {
  // 8 MB, far more than a pipe holds: perf has to wait while the sink is slow.
  const perfPath = await fakePerf('big', 'head -c 8000000 /dev/zero | tr "\\0" "x"');
  let bytes = 0;
  let calls = 0;
  const run = await perfScript(
    'perf.data',
    async (chunk) => {
      bytes += chunk.length;
      assert.ok(chunk.every((b) => b === 0x78));
      if (++calls % 20 === 0) await sleep(1);
    },
    { perfPath },
  );
  assert.equal(run.bytes, 8_000_000);
  assert.equal(bytes, 8_000_000);
  assert.equal(run.command[0], perfPath);
});

test('a failing sink stops perf and its error is the one thrown', async () => {
  const perfPath = await fakePerf('endless', 'exec yes perf-script-line');
  const error = await perfScript(
    'perf.data',
    () => {
      throw new Error('sink full');
    },
    { perfPath },
  ).then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.equal((error as Error).message, 'sink full');
});

test('perf failing after some output is a PerfError with its stderr', async () => {
  const perfPath = await fakePerf(
    'broken',
    'echo "some text"; echo "File perf.data not owned by current user or root (use -f to override)" >&2; exit 255',
  );
  const error = await perfScript('perf.data', () => {}, { perfPath }).then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.exitCode, 255);
  assert.match(error.message, /not owned by current user/);
});

test('a damaged perf.data gets a remedy about the file, and the message names the folder perf ran in', async () => {
  const perfPath = await fakePerf(
    'damaged',
    'echo "incompatible file format (rerun with -v to learn more)" >&2; exit 255',
  );
  const error = await perfScript('perf.data', () => {}, { perfPath, cwd: scratch.dir }).then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.code, 'PERF_FAILED');
  assert.match(
    error.message,
    new RegExp(`\\(in ${scratch.dir}\\) failed with exit code 255: incompatible file format`),
  );
  assert.match(error.remedy ?? '', /damaged or cut short/);
});

test('the real perf script streams a real recording', async (t) => {
  if (!canRecord(t)) return;
  const out = join(scratch.dir, 'recording');
  const { pid } = await recordNode(out, 800);
  try {
    const chunks: Buffer[] = [];
    const run = await perfScript('perf.data', (chunk) => void chunks.push(chunk), { cwd: out });
    const text = Buffer.concat(chunks).toString();
    assert.equal(run.bytes, Buffer.byteLength(text));
    assert.ok(text.startsWith('# ========\n'));
    assert.match(text, /cpu-clock:/);
    for (const name of burnFunctions) assert.ok(text.includes(name), name);
    assert.deepEqual(run.command.slice(1), perfScriptArgs('perf.data'));

    const controller = new AbortController();
    controller.abort();
    await assert.rejects(
      perfScript('perf.data', () => {}, { cwd: out, signal: controller.signal }),
      (e) => isProfcpuError(e, 'ABORTED'),
    );
  } finally {
    execFileSync('rm', ['-f', `/tmp/perf-${pid}.map`]);
  }
});

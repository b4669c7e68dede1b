import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { formatCommand, PerfError, runPerf, startPerf } from '../../src/perf/exec.js';
import { scratchFolder } from '../support/fake-executables.js';

const scratch = scratchFolder('exec');
const fakePerf = (name: string, body: string) => scratch.executable(name, body);

test('runPerf returns stdout and stderr of a successful run', async () => {
  const perfPath = await fakePerf('ok', 'echo "args: $*"; echo note >&2');
  const result = await runPerf(['version', '--build-options'], { perfPath });
  assert.equal(result.stdout, 'args: version --build-options\n');
  assert.equal(result.stderr, 'note\n');
  assert.deepEqual(result.command, [perfPath, 'version', '--build-options']);
});

test('a failing perf becomes a PerfError keeping command, exit code and the stderr tail', async () => {
  const perfPath = await fakePerf(
    'fail',
    'i=0; while [ $i -lt 2000 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real problem" >&2; exit 3',
  );
  const error = await runPerf(['script', '-i', 'x y'], { perfPath }).then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.code, 'PERF_FAILED');
  assert.equal(error.exitCode, 3);
  assert.equal(error.signal, undefined);
  assert.deepEqual(error.command, [perfPath, 'script', '-i', 'x y']);
  assert.ok(error.stderrTail.endsWith('the real problem'));
  assert.ok(error.stderrTail.length <= 4096);
  assert.match(error.message, /failed with exit code 3: the real problem$/);
  assert.match(error.message, /'x y'/);
  assert.ok(error.remedy);
});

test('a missing perf is NO_PERF with the package to install', async () => {
  const error = await runPerf(['version'], { perfPath: join(scratch.dir, 'no-such-perf') }).then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.code, 'NO_PERF');
  assert.match(error.remedy ?? '', /linux-perf/);
  assert.match(error.remedy ?? '', /linux-tools-\$\(uname -r\)/);
});

test('startPerf streams stdout and reports a signal death', async () => {
  const perfPath = await fakePerf('stream', 'echo first; echo warn >&2; kill -KILL $$');
  const perf = startPerf(['record'], { perfPath });
  let text = '';
  for await (const chunk of perf.stdout) text += String(chunk);
  assert.equal(text, 'first\n');
  const error = await perf.done.then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.signal, 'SIGKILL');
  assert.equal(error.stderrTail, 'warn');
  assert.match(error.message, /was killed by SIGKILL/);
});

test('aborting kills perf and fails with ABORTED', async () => {
  const perfPath = await fakePerf('slow', 'echo started; exec sleep 30');
  const controller = new AbortController();
  const perf = startPerf(['record'], { perfPath, signal: controller.signal });
  perf.stdout.once('data', () => controller.abort());
  for await (const _ of perf.stdout) void _;
  const error = await perf.done.then(
    () => assert.fail('should have failed'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof PerfError);
  assert.equal(error.code, 'ABORTED');
  assert.equal(error.signal, 'SIGTERM');
});

test('startPerf resolves with exit code 0 and passes cwd and env', async () => {
  const perfPath = await fakePerf('env', 'echo "$PWD $PROFCPU_TEST_VAR"');
  const perf = startPerf([], { perfPath, cwd: scratch.dir, env: { PROFCPU_TEST_VAR: 'set' } });
  let text = '';
  for await (const chunk of perf.stdout) text += String(chunk);
  assert.equal(text, `${scratch.dir} set\n`);
  assert.equal((await perf.done).exitCode, 0);
});

test('formatCommand quotes only what a shell would split', () => {
  assert.equal(
    formatCommand(['perf', 'script', '-i', '/a b/perf.data', "it's"]),
    `perf script -i '/a b/perf.data' 'it'\\''s'`,
  );
});

import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { foldFile } from '../../src/stacks/fold-file.js';
import { need } from '../support/requirements.js';
import { foldStream } from '../../src/stacks/fold.js';

const fixture = (name: string) => readFileSync(new URL(`../fixtures/perf-script/${name}`, import.meta.url));

async function* chunks(buf: Buffer) {
  yield buf;
}

// Worker threads run the built module (dist/), as the CLI does.
const built = new URL('../../dist/stacks/fold-file.js', import.meta.url);

test('worker threads give the result of one thread: stacks, counts, events, quality, warnings', async (t) => {
  if (!need(t, existsSync(built), 'the build in dist/ (npm run build)')) return;
  const { foldFile: foldFileBuilt } = (await import(built.href)) as { foldFile: typeof foldFile };
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-fold-file-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'input.txt');
  const text = Buffer.concat([fixture('two-events.txt'), fixture('garbage.txt'), fixture('node-jit.txt')]);
  writeFileSync(path, Buffer.concat([text, text, text]));
  const expectedWarnings: string[] = [];
  const expected = await foldStream(chunks(Buffer.concat([text, text, text])), {}, (m) => expectedWarnings.push(m));
  const warnings: string[] = [];
  const parallel = await foldFileBuilt(path, {}, (m) => warnings.push(m), undefined, {
    threads: 3,
    parallelThreshold: 0,
  });
  assert.deepEqual(parallel, expected);
  assert.deepEqual(new Set(warnings), new Set(expectedWarnings));
  const single = await foldFile(path, {}, undefined, undefined, { threads: 1 });
  assert.deepEqual(single, expected);
  const crlf = join(dir, 'crlf.txt');
  writeFileSync(crlf, fixture('crlf.txt').toString('latin1').repeat(20), 'latin1');
  const crlfExpected = await foldFile(crlf, { compat: true }, undefined, undefined, { threads: 1 });
  assert.deepEqual(
    await foldFileBuilt(crlf, { compat: true }, undefined, undefined, { threads: 4, parallelThreshold: 0 }),
    crlfExpected,
  );
});

test('an unreadable path is an IO error with a remedy', async () => {
  await assert.rejects(foldFile('/nonexistent/perf.txt'), (error) => {
    assert.ok(isProfcpuError(error, 'IO'));
    assert.match(error.message, /cannot read \/nonexistent\/perf\.txt/);
    assert.ok(error.remedy);
    return true;
  });
});

test('an aborted signal stops before reading', async () => {
  const controller = new AbortController();
  controller.abort();
  await assert.rejects(foldFile('/nonexistent', {}, undefined, undefined, { signal: controller.signal }), (error) =>
    isProfcpuError(error, 'ABORTED'),
  );
});

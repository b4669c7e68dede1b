// The kallsyms step: this machine's kernel code symbols kept in target/kallsyms (and none of its data symbols); nothing
// kept when the addresses are hidden (a sidecar without CAP_SYSLOG reads every address as 0), as a fake procfs shows.
import assert from 'node:assert/strict';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { kallsymsStep } from '../../src/kernel/kallsyms-step.js';
import type { StepContext } from '../../src/step/step.js';
import { kallsymsTable } from '../../src/formats/kallsyms.js';
import { needRoot } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

async function folders(t: TestContext) {
  const dir = await tempDir(t, 'kallsyms');
  await mkdir(join(dir, 'out', 'target'), { recursive: true });
  await mkdir(join(dir, 'proc'));
  return { out: join(dir, 'out'), proc: join(dir, 'proc') };
}

function context(dir: string, procRoot: string): StepContext {
  return {
    dir,
    procRoot,
    perfPath: 'perf',
    target: {} as StepContext['target'],
    signal: new AbortController().signal,
    warn: () => {},
    progress: () => {},
  };
}

test('this machine’s kallsyms: its code symbols are kept, and name a kernel address as the file does', async (t) => {
  if (!needRoot(t)) return;
  const { out } = await folders(t);
  const report = await kallsymsStep().afterRecording!(context(out, '/proc'));
  assert.equal(report?.['kept'], true);
  const kept = await readFile(join(out, layout.kallsyms), 'utf8');
  const lines = kept.trim().split('\n');
  assert.ok(lines.every((line) => /^[0-9a-f]+ [tTwW] /.test(line)));
  const live = (await readFile('/proc/kallsyms', 'utf8')).split('\n');
  const schedule = live.find((line) => / T schedule$/.test(line))!;
  const address = BigInt(`0x${schedule.split(' ')[0]}`);
  assert.deepEqual(kallsymsTable(kept).lookup(address + 4n), { name: 'schedule', offset: 4n });
});

test('hidden addresses (all 0): nothing kept, and the report says why', async (t) => {
  const { out, proc } = await folders(t);
  await writeFile(
    join(proc, 'kallsyms'),
    '0000000000000000 T _text\n0000000000000000 t schedule\n0000000000000000 D x\n',
  );
  const report = await kallsymsStep().afterRecording!(context(out, proc));
  assert.deepEqual(report, { kept: false, reason: 'addresses hidden' });
  await assert.rejects(stat(join(out, layout.kallsyms)));
});

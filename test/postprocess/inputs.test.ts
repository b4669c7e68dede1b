import assert from 'node:assert/strict';
import { chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { checkPerfData } from '../../src/postprocess/inputs.js';
import { needRoot } from '../support/requirements.js';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-inputs-'));
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const mine = { force: false, euid: process.geteuid?.() };

test('a missing folder, a file instead of a folder, a folder without perf.data: NO_PERF_DATA with a remedy', async () => {
  for (const path of [join(dir, 'nope'), __filenameLike()]) {
    await assert.rejects(checkPerfData(path, mine), (e) => isProfcpuError(e, 'NO_PERF_DATA') && Boolean(e.remedy));
  }
  await assert.rejects(
    checkPerfData(dir, mine),
    (e) => isProfcpuError(e, 'NO_PERF_DATA') && /no perf\.data in/.test(e.message),
  );
});

test('an empty perf.data is NO_PERF_DATA saying perf record did not finish', async () => {
  await writeFile(join(dir, 'perf.data'), '');
  await assert.rejects(checkPerfData(dir, mine), (e) => isProfcpuError(e, 'NO_PERF_DATA') && /empty/.test(e.message));
});

test('a perf.data owned by another user is PERF_DATA_OWNER unless forced', async (t) => {
  if (!needRoot(t)) return;
  await writeFile(join(dir, 'perf.data'), 'PERFILE2');
  await chown(join(dir, 'perf.data'), 65534, 65534);
  await assert.rejects(
    checkPerfData(dir, mine),
    (e) => isProfcpuError(e, 'PERF_DATA_OWNER') && /uid 65534/.test(e.message) && /chown 0 /.test(e.remedy ?? ''),
  );
  const ok = await checkPerfData(dir, { ...mine, force: true });
  assert.equal(ok.path, join(dir, 'perf.data'));
  await chown(join(dir, 'perf.data'), 0, 0);
  assert.equal((await checkPerfData(dir, mine)).stat.uid, 0);
});

function __filenameLike(): string {
  return new URL(import.meta.url).pathname;
}

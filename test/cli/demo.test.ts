import assert from 'node:assert/strict';
import { access, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { namesWorkload } from '../fixtures/node-burn/node-burn.js';
import { canRecord } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

test('demo writes a full output folder whose flame graph names the workload’s JavaScript functions', async (t) => {
  if (!canRecord(t)) return;
  const work = await tempDir(t, 'demo', '/var/tmp');
  const run = await runCli(['demo', '--duration', '2'], { cwd: work });
  assert.equal(run.exitCode, 0, String(run.all));
  const match = /flame graph (profilings\/\d\d-\d\d-\d\d_\d{4}-\d\d-\d\d)\/flamegraph\.svg/.exec(String(run.stdout));
  assert.ok(match, String(run.stdout));
  const dir = join(work, match[1]!);
  assert.ok(namesWorkload(await readFile(join(dir, layout.flamegraphSvg), 'utf8')), 'the SVG names the workload');
  for (const file of [layout.tarball, layout.manifest, layout.flamegraphHtml, layout.speedscope, layout.perfScript])
    await access(join(dir, file));
  const pid = /started the demo workload \(PID (\d+)\)/.exec(String(run.stderr))?.[1];
  assert.ok(pid);
  await assert.rejects(access(`/proc/${pid}`), 'the workload is stopped');
});

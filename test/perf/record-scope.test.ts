// The record scope: which perfs spin on exited threads, where a target's cgroup is found, and a real recording of a
// target whose threads come and go, recorded per cgroup, with perf's CPU read from the manifest.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { cgroupMounts, parseCgroupV2, spinsWhenThreadsExit } from '../../src/perf/record-scope.js';
import { ownCgroup } from '../support/cgroup.js';
import { runCli } from '../support/cli.js';
import { canRecord, need } from '../support/requirements.js';

test('perfs before 7.2 spin on exited threads', () => {
  for (const v of ['6.1.187', '6.12.95', '7.1.13', '5.10']) assert.equal(spinsWhenThreadsExit(v), true, v);
  for (const v of ['7.2.6', '7.3.4', '8.0', 'unknown']) assert.equal(spinsWhenThreadsExit(v), false, v);
});

test('the cgroup v2 line and the cgroup mounts are read', () => {
  assert.equal(parseCgroupV2('4:memory:/x\n0::/system.slice/app.service\n'), '/system.slice/app.service');
  assert.equal(parseCgroupV2('4:memory:/x\n'), undefined);
  const mountinfo = [
    '30 25 0:26 / /sys/fs/cgroup/unified rw,relatime shared:9 - cgroup2 cgroup2 rw',
    '31 25 0:27 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu',
    '32 25 0:28 / /mnt/with\\040space rw - cgroup cgroup rw,perf_event',
  ].join('\n');
  assert.deepEqual(cgroupMounts(mountinfo), { v2: '/sys/fs/cgroup/unified', perfEventV1: '/mnt/with space' });
});

/** A Node process that burns CPU and starts and ends a worker thread every 100 ms, with a perf map. */
const churn = `
const { Worker } = require('worker_threads');
setInterval(() => new Worker('let x = 0; for (let i = 0; i < 1e6; i++) x += i;', { eval: true }), 100);
function profcpuChurnBurn() { const end = Date.now() + 50; while (Date.now() < end); setImmediate(profcpuChurnBurn); }
profcpuChurnBurn();
setTimeout(() => process.exit(0), 60000);
`;

test(
  'a target whose threads come and go is recorded per cgroup: perf stays cheap, only its samples are kept',
  {
    timeout: 120_000,
  },
  async (t) => {
    if (!canRecord(t)) return;
    const work = await mkdtemp(join(tmpdir(), 'profcpu-scope-'));
    const script = join(work, 'churn.js');
    await writeFile(script, churn);
    const target = spawn(process.execPath, ['--perf-basic-prof', script], {
      stdio: 'ignore',
      // V8's isolate logs go to the scratch folder (--logfile=- would abort node when a worker exits).
      cwd: work,
    });
    // A neighbour in the same cgroup: recorded by perf, left out by postprocess.
    const neighbour = spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' });
    t.after(async () => {
      target.kill('SIGKILL');
      neighbour.kill('SIGKILL');
      await rm(work, { recursive: true, force: true });
      await rm(`/tmp/perf-${target.pid}.map`, { force: true });
    });
    const cgroup = await ownCgroup(t, target.pid!, neighbour.pid!);
    if (!need(t, cgroup !== undefined, 'cgroup v2 (without a v1 perf_event hierarchy) to put the target in')) return;
    await sleep(500);

    const out = join(work, 'out');
    const run = await runCli(
      ['collect', '--pid', String(target.pid), '--duration', '4', '--symbols', 'none', '--output', out],
      { timeout: 90_000 },
    );
    assert.equal(run.exitCode, 0, String(run.all));
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      collect: { record: { scope: { kind: string }; seconds: number; command: string[] }; cpuMs: { perf?: number } };
    };
    const { record, cpuMs } = manifest.collect;
    const perfVersion = /perf version (\S+)/.exec(String(run.all))?.[1];
    if (spinsWhenThreadsExit(perfVersion ?? (await perfVersionHere()))) {
      assert.equal(record.scope.kind, 'cgroup', String(run.all));
      assert.ok(record.command.includes('-G'), record.command.join(' '));
    }
    // perf spinning takes 50-100 % of a core; recording a cgroup costs a few %. The bound is far from both.
    const share = (cpuMs.perf ?? 0) / (record.seconds * 1000);
    t.diagnostic(`perf used ${cpuMs.perf} ms of CPU in ${record.seconds} s (${(share * 100).toFixed(1)} %)`);
    assert.ok(share < 0.25, `perf used ${(share * 100).toFixed(1)} % of a core`);
    const folded = await readFile(join(out, 'folded_stacks.out'), 'utf8');
    assert.match(folded, /profcpuChurnBurn/);
    assert.doesNotMatch(folded, /^sh;/m, 'the neighbour in the cgroup is left out');
  },
);

async function perfVersionHere(): Promise<string> {
  const { execFileSync } = await import('node:child_process');
  return /perf version (\S+)/.exec(execFileSync('perf', ['version'], { encoding: 'utf8' }))?.[1] ?? 'unknown';
}

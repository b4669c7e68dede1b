// The sidecar scenario: a Node target in its own PID and mount namespace with a private /tmp, profiled by the built
// CLI from a sidecar with a different /tmp, joined to the target's PID namespace with its own /proc. JIT names must
// resolve without any shared /tmp, and again when the folder is post-processed after the target has exited.
import assert from 'node:assert/strict';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { layout } from '../../src/output/layout.js';
import { runCli } from '../support/cli.js';
import { runCliInSidecar, startNamespacedTarget } from '../support/namespaces.js';
import { canRecord, needCommand } from '../support/requirements.js';
import { demoWorkload, namesWorkload, nodePerfMapFlags } from '../fixtures/node-burn/node-burn.js';
import { tempDir } from '../support/temp.js';

test('collect from a sidecar names JIT frames, and so does postprocess after the target exited', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'unshare', 'util-linux')) return;
  const work = await tempDir(t, 'sidecar', '/var/tmp');
  const target = await startNamespacedTarget(process.execPath, [...nodePerfMapFlags, demoWorkload, '60'], {
    ready: ({ hostPid, nsPid }) =>
      stat(`/proc/${hostPid}/root/tmp/perf-${nsPid}.map`).then(
        () => true,
        () => false,
      ),
  });
  t.after(() => target.kill());
  assert.equal(target.nsPid, 1);
  // The map lives only in the target's /tmp.
  await assert.rejects(stat(`/tmp/perf-${target.nsPid}.map`).then((s) => assert.ok(s.size === -1)));

  // ps in the sidecar sees the target as PID 1, and its perf map through /proc/1/root.
  const ps = await runCliInSidecar(target.hostPid, ['ps'], { cwd: work });
  assert.equal(ps.exitCode, 0, String(ps.all));
  assert.match(String(ps.stdout), /^1 +1 +node +yes \d+K +\S*node --perf-basic-prof/m);

  const dir = join(work, 'out');
  // No --pid: with no .NET process in sight, collect picks PID 1, the target, and says why.
  const run = await runCliInSidecar(target.hostPid, ['collect', '-duration', '3', '-output', dir], { cwd: work });
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), /profiling process 1 .*no \.NET process is visible, so PID 1 was chosen/);
  const targetJson = JSON.parse(await readFile(join(dir, layout.targetInfo), 'utf8')) as { pid: number; nspid: number };
  assert.deepEqual([targetJson.pid, targetJson.nspid], [1, 1]);
  assert.ok((await stat(join(dir, layout.perfMap(1)))).size > 0, 'the perf map was snapshotted');
  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  assert.ok(namesWorkload(folded), `the workload's functions are named in the sidecar's profile:\n${folded}`);

  await target.kill();
  const again = await runCli(['postprocess', '--dir', dir], { cwd: work });
  assert.equal(again.exitCode, 0, String(again.all));
  const refolded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  assert.ok(namesWorkload(refolded), `the workload's functions are named after the target exited:\n${refolded}`);
});

/** The newest sample's time (CLOCK_MONOTONIC seconds) in perf script text. */
function lastSampleTime(text: string): number {
  let last = Number.NaN;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || /^\s/.test(line)) continue;
    const time = Number(/ (\d+\.\d+): /.exec(line)?.[1]);
    if (Number.isFinite(time) && !(time <= last)) last = time;
  }
  return last;
}

test('a target killed mid-recording takes the sidecar with it; postprocess recovers all but the last moment', async (t) => {
  if (!canRecord(t) || !needCommand(t, 'unshare', 'util-linux')) return;
  const work = await tempDir(t, 'sidecar-stop', '/var/tmp');
  const target = await startNamespacedTarget(process.execPath, [...nodePerfMapFlags, demoWorkload, '60'], {
    ready: ({ hostPid, nsPid }) =>
      stat(`/proc/${hostPid}/root/tmp/perf-${nsPid}.map`).then(
        () => true,
        () => false,
      ),
  });
  t.after(() => target.kill());
  const dir = join(work, 'out');
  const sidecar = runCliInSidecar(target.hostPid, ['collect', '-duration', '30', '-output', dir], { cwd: work });
  // Recording: perf writes each sample as it comes, so perf.data grows past its header within a second or two.
  for (
    let i = 0;
    i < 200 && ((await stat(join(dir, layout.perfData)).catch(() => undefined))?.size ?? 0) < 64 << 10;
    i++
  )
    await sleep(50);
  await sleep(2000);
  const killedAt = Number(process.hrtime.bigint()) / 1e9;
  await target.kill();
  const ended = await sidecar;
  assert.notEqual(ended.exitCode, 0, 'the sidecar died with the target’s PID namespace');
  assert.equal(await readFile(join(dir, layout.manifest)).catch(() => 'none'), 'none');

  const run = await runCli(['postprocess', '--dir', dir], { cwd: work });
  assert.equal(run.exitCode, 0, String(run.all));
  const manifest = JSON.parse(await readFile(join(dir, layout.manifest), 'utf8')) as {
    postprocess: { recovered?: { samples: number } };
    samples: { parsed: number };
  };
  // perf sees the target's events end a moment before the kill reaches it, and sometimes finishes its file in that
  // moment; otherwise postprocess finishes it, and says so.
  if (manifest.postprocess.recovered)
    assert.match(
      String(run.stderr),
      /perf\.data was not finished .*: (\d+ samples|its whole \(compressed\) records) recovered/,
    );
  // Stack copies recorded by default, read by the built-in engine even with no machine named in the recovered file.
  assert.doesNotMatch(String(run.stderr), /perf script reads it instead/);
  assert.ok(manifest.samples.parsed > 100, JSON.stringify(manifest.samples));
  const folded = await readFile(join(dir, layout.foldedStacks), 'utf8');
  assert.ok(namesWorkload(folded), `the workload's functions are named:\n${folded}`);
  // At most the last two seconds are lost (both clocks are the kernel's CLOCK_MONOTONIC).
  const lost = killedAt - lastSampleTime(await readFile(join(dir, layout.perfScript), 'utf8'));
  assert.ok(lost <= 2, `the last sample is ${lost.toFixed(2)} s before the kill`);
});

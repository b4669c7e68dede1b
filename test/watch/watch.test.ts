// `profcpu watch` end to end with a Node target that idles and burns CPU while a file exists (quick: no .NET build):
// one profile per episode of high CPU however long it lasts, the limit on actions per window, a trigger file read and
// refused by that limit, retention keeping the newest run only, each run holding what `collect` writes, SIGTERM ending
// the watch cleanly; and SIGTERM in the middle of a profile, which is finished (stopped early, post-processed).
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { canRecord } from '../support/requirements.js';
import { nodePerfMapFlags } from '../fixtures/node-burn/node-burn.js';
import { burnWhileScript, lines, startWatch } from './watch-support.js';
import { tempDir } from '../support/temp.js';

async function startBurner(t: TestContext, gate: string) {
  const child = spawn(process.execPath, [...nodePerfMapFlags, burnWhileScript, gate], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  t.after(async () => {
    child.kill('SIGKILL');
    await exited;
    await rm(`/tmp/perf-${child.pid}.map`, { force: true });
  });
  let out = '';
  await new Promise<void>((resolve) =>
    child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('ready\n')) resolve();
    }),
  );
  return child;
}

/**
 * What every test starts with: a Node burner (burning from the start when `burning`, else once the gate file is
 * written) and a watch of it in `work/watch`, given `--pid PID` and `args`. Undefined (the test skipped) without root
 * or perf.
 */
async function watchBurner(t: TestContext, options: { burning: boolean }, args: readonly string[]) {
  if (!canRecord(t)) return undefined;
  const work = await tempDir(t, 'watch', '/var/tmp');
  const gate = join(work, 'burn');
  if (options.burning) await writeFile(gate, '');
  const burner = await startBurner(t, gate);
  const dir = join(work, 'watch');
  const watch = startWatch(t, dir, ['--pid', String(burner.pid), ...args]);
  return { gate, burner, dir, watch };
}

/** What collect writes in its output folder, as its own test lists it. */
const collectFiles = [
  layout.perfData,
  layout.targetInfo,
  layout.procMaps,
  layout.foldedStacks,
  layout.flamegraphSvg,
  layout.flamegraphHtml,
  layout.speedscope,
  layout.pprof,
  layout.perfScript,
  layout.manifest,
  layout.tarball,
];

test('one profile per episode of high CPU, at most --max-actions per window, retention keeps the newest run', async (t) => {
  // 10 % of a core: the burner gets well over that even on a machine shared with other work, and idles near 0.
  const scene = await watchBurner(t, { burning: false }, [
    ...['--cpu-above', '10', '--for', '2s', '--duration', '1'],
    ...['--cooldown', '0', '--max-actions', '2', '--window', '1h', '--max-runs', '1'],
  ]);
  if (!scene) return;
  const { gate, burner, dir, watch } = scene;
  await watch.waitFor(new RegExp(`rule rule1: watching process ${burner.pid} `));
  await sleep(3000);
  assert.equal(lines(watch.log(), /trigger:/).length, 0, `no trigger while idle:\n${watch.log()}`);

  for (let episode = 1; episode <= 2; episode++) {
    const from = watch.log().length;
    await writeFile(gate, '');
    await watch.waitFor(/rule rule1: profile done: \d+ samples/, 120_000, from);
    // Still burning, for more than a window: no second trigger in this episode.
    await sleep(3000);
    await rm(gate);
    await sleep(3000);
    assert.equal(
      lines(watch.log().slice(from), /trigger:/).length,
      1,
      `one trigger in episode ${episode}:\n${watch.log()}`,
    );
  }

  // A third episode, and a trigger file: both refused by the limit of 2 actions an hour.
  let from = watch.log().length;
  await writeFile(gate, '');
  await watch.waitFor(/trigger: .*at or above 10%; skipped, limit reached: 2 action\(s\) in 1 h/, 60_000, from);
  await rm(gate);
  from = watch.log().length;
  await writeFile(join(dir, 'triggers', 'rule1'), '');
  await watch.waitFor(/trigger: .*: on demand; skipped, limit reached/, 30_000, from);
  await assert.rejects(stat(join(dir, 'triggers', 'rule1')), /ENOENT/, 'the trigger file is removed');

  watch.child.kill('SIGTERM');
  assert.equal(await watch.exited, 0, watch.log());
  assert.match(watch.log(), /watch: ended \(stopped\) after 2 run\(s\)/);

  const runs = await watch.index();
  assert.equal(runs.length, 2, JSON.stringify(runs, null, 2));
  assert.deepEqual(
    runs.map((r) => [r.status, r.trigger.type, r.target.pid, r.removedAt !== undefined]),
    [
      ['done', 'cpu', burner.pid, true],
      ['done', 'cpu', burner.pid, false],
    ],
  );
  assert.ok(Number(runs[1]!.trigger.figures['cpuPercent']) >= 10);
  const folders = (await readdir(dir)).filter((n) => !['index.json', 'index.html', 'triggers'].includes(n));
  assert.deepEqual(folders, [runs[1]!.id], 'retention removed the older run');
  const run = join(dir, runs[1]!.id);
  for (const file of collectFiles) assert.ok((await stat(join(run, file))).isFile(), `${file} in the run`);
  const folded = await readFile(join(run, layout.foldedStacks), 'utf8');
  assert.ok(folded.includes('profcpuWatchBurn'), `the burning function is named:\n${folded.slice(0, 2000)}`);
  const html = await readFile(join(dir, 'index.html'), 'utf8');
  assert.ok(html.includes(`<a href="${runs[1]!.id}/flamegraph.svg">flame graph</a>`), html);
});

test('SIGTERM during a profile: the recording stops, the run is post-processed and indexed, the watch ends 0', async (t) => {
  const scene = await watchBurner(t, { burning: true }, ['--on-demand', '--duration', '60']);
  if (!scene) return;
  const { dir, watch } = scene;
  await watch.waitFor(/rule rule1: watching process/);
  watch.child.kill('SIGUSR1');
  await watch.waitFor(/rule rule1: trigger: .*on demand\n.*rule rule1: profile of process/);
  await watch.waitFor(/recording for 60 s/);
  await sleep(3000);
  watch.child.kill('SIGTERM');
  assert.equal(await watch.exited, 0, watch.log());
  assert.match(watch.log(), /SIGTERM: ending; an action under way is finished first/);
  assert.match(watch.log(), /rule rule1: profile done: \d+ samples in \d+\.\d s/);
  const [run] = await watch.index();
  assert.equal(run?.status, 'done');
  assert.equal(run.figures?.['end'], 'stopped');
  assert.ok((await stat(join(dir, run.id, layout.flamegraphSvg))).isFile());
});

test('a second SIGTERM abandons the profile under way: its folder is removed, the index says discarded, exit 130', async (t) => {
  const scene = await watchBurner(t, { burning: true }, ['--on-demand', '--duration', '60']);
  if (!scene) return;
  const { dir, watch } = scene;
  await watch.waitFor(/rule rule1: watching process/);
  await writeFile(join(dir, 'triggers', 'rule1'), '');
  await watch.waitFor(/recording for 60 s/);
  await sleep(2000);
  watch.child.kill('SIGTERM');
  await watch.waitFor(/SIGTERM: ending/);
  watch.child.kill('SIGTERM');
  assert.equal(await watch.exited, 130, watch.log());
  assert.match(watch.log(), /SIGTERM: abandoning the action under way/);
  assert.match(watch.log(), /rule rule1: profile abandoned, \S+ removed/);
  const [run] = await watch.index();
  assert.equal(run?.status, 'discarded');
  await assert.rejects(stat(join(dir, run.id)), /ENOENT/);
});

test('a schedule: a profile every 10 s, each its own run, until the rule’s lifetime ends the watch', async (t) => {
  const scene = await watchBurner(t, { burning: false }, [
    ...['--every', '10s', '--duration', '1', '--cooldown', '0'],
    ...['--lifetime', '25s', '--postprocess', 'false'],
  ]);
  if (!scene) return;
  const { burner, dir, watch } = scene;
  assert.equal(await watch.exited, 0, watch.log());
  assert.match(watch.log(), /rule rule1: lifetime of 25 s over, the rule ends/);
  // At 10 s and 20 s; only one when a slow machine makes the first profile outlast the second period's lifetime.
  const triggers = lines(watch.log(), /trigger:/);
  assert.ok(triggers.length >= 1 && triggers.length <= 2, watch.log());
  for (const line of triggers) assert.match(line, new RegExp(`trigger: process ${burner.pid} .*: every 10 s$`));
  const runs = await watch.index();
  assert.equal(runs.length, triggers.length);
  for (const run of runs) assert.deepEqual([run.status, run.trigger.type], ['done', 'schedule']);
  // --no-postprocess: the raw recording only, as collect leaves it.
  for (const run of runs) assert.ok((await stat(join(dir, run.id, layout.perfData))).size > 0);
});

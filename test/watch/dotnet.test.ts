// `profcpu watch` with a YAML rules file and the .NET fixture app, which idles and burns CPU while a file exists: no
// trigger while idle, exactly one profile per burn, the app restarting (a new process, found by the rule's filters
// again) and profiled when it burns in turn, its methods named in the run's flame graph.
import assert from 'node:assert/strict';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { startDotnetApp } from '../support/dotnet-app.js';
import { canRecord, needDotnet } from '../support/requirements.js';
import { lines, startWatch } from './watch-support.js';
import { tempDir } from '../support/temp.js';

// Other tests may run fixture apps at the same time: this test's are told apart by their --burn-while file.
const rules = (gate: string) => `
# One rule: the fixture app over 10 % of a core for 2 s gets a 2-second profile.
rules:
  - name: fixture-hot
    filters: { name: ProfcpuFixture, runtime: dotnet, commandLine: ${JSON.stringify(gate)} }
    trigger: { type: cpu, above: 10, for: 2s }
    actions:
      - kind: profile
        duration: 2s
    limits: { maxActions: 5, window: 1h, cooldown: 0 }
retention: { maxRuns: 5, maxBytes: 4GiB }
`;

test('a .NET app that idles, burns, restarts and burns again: one profile per burn, the restarted app found again', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'watch', '/var/tmp');
  const gate = join(work, 'burn');
  const rulesFile = join(work, 'rules.yaml');
  await writeFile(rulesFile, rules(gate));
  const first = await startDotnetApp({ burnWhile: gate, workloads: ['generic', 'linq'] });
  t.after(() => first.kill());
  const dir = join(work, 'watch');
  const watch = startWatch(t, dir, ['--rules', rulesFile]);
  await watch.waitFor(new RegExp(`rule fixture-hot: watching process ${first.pid} `));
  await sleep(4000);
  assert.equal(lines(watch.log(), /trigger:/).length, 0, `no trigger while the app idles:\n${watch.log()}`);

  const burn = async (pid: number) => {
    const from = watch.log().length;
    await writeFile(gate, '');
    await watch.waitFor(/rule fixture-hot: profile done: \d+ samples/, 180_000, from);
    await sleep(3000);
    await rm(gate);
    const triggers = lines(watch.log().slice(from), /trigger:/);
    assert.equal(triggers.length, 1, `one trigger per burn:\n${watch.log()}`);
    assert.match(triggers[0]!, new RegExp(`trigger: process ${pid} .*CPU \\d+% of a core over 2 s, at or above 10%`));
  };
  await burn(first.pid);

  await first.kill();
  await watch.waitFor(new RegExp(`rule fixture-hot: process ${first.pid} .* is gone`), 30_000);
  const second = await startDotnetApp({ burnWhile: gate, workloads: ['generic', 'linq'] });
  t.after(() => second.kill());
  await watch.waitFor(new RegExp(`rule fixture-hot: watching process ${second.pid} `), 30_000);
  await burn(second.pid);

  watch.child.kill('SIGTERM');
  assert.equal(await watch.exited, 0, watch.log());
  const runs = await watch.index();
  assert.deepEqual(
    runs.map((r) => [r.rule, r.status, r.target.pid]),
    [
      ['fixture-hot', 'done', first.pid],
      ['fixture-hot', 'done', second.pid],
    ],
  );
  const folded = await readFile(join(dir, runs[1]!.id, layout.foldedStacks), 'utf8');
  assert.match(folded, /ProfcpuFixture\.(LinqMill::Grind|Hot\+Outer`1\+Inner`1)/, folded.slice(0, 3000));
});

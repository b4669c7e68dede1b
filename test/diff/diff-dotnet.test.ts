// `profcpu diff` on two real recordings of the .NET fixture where one workload is made twice as heavy: the `linq`
// workload on one thread beside `generic`, then on two threads beside it. On 2 CPUs both recordings keep the CPUs
// busy, so the linq share goes from a half to two thirds: the diff must point at LinqMill::Grind (about +17 points)
// and at little else (generic's frames shrink by as much: the shares add up to 100%). Tiered compilation is off in
// both: which frames the JIT inlines would otherwise differ from run to run.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { diffStacks, type FrameChange } from '../../src/stacks/diff.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { runCli } from '../support/cli.js';
import { startDotnetApp, type DotnetAppWorkload } from '../support/dotnet-app.js';
import { canRecord, needDotnet } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

async function record(t: TestContext, workloads: DotnetAppWorkload[], dir: string): Promise<void> {
  // Fully optimized code from the first call: whether tiered compilation inlines Churn into Run's on-stack
  // replacement varies from run to run, and moves time between frames that are not the point here.
  const app = await startDotnetApp({ version: 10, workloads, seconds: 120, env: { DOTNET_TieredCompilation: '0' } });
  try {
    const run = await runCli(
      ['collect', '--pid', String(app.pid), '--duration', '4', '--symbols', 'none', '--output', dir],
      { timeout: 120_000 },
    );
    assert.equal(run.exitCode, 0, run.all);
  } finally {
    await app.kill();
  }
  t.diagnostic(
    `${workloads.join(',')}: ${(await readFile(join(dir, layout.foldedStacks), 'utf8')).length} bytes folded`,
  );
}

const grind = 'ProfcpuFixture.LinqMill::Grind_[j]';
const churn = /Hot\+Outer`1\+Inner`1.*::Churn_\[j\]$/;

test('diff of the .NET fixture with one workload made twice as heavy points at that method', async (t) => {
  if (!canRecord(t) || !needDotnet(t)) return;
  const root = await tempDir(t, 'diff-dotnet');
  const before = join(root, 'before');
  const after = join(root, 'after');
  await record(t, ['generic', 'linq'], before);
  await record(t, ['generic', 'linq', 'linq'], after);

  const out = join(root, 'diff');
  const run = await runCli(['diff', before, join(after, layout.tarball), '-o', out]);
  assert.equal(run.exitCode, 0, run.all);
  const report = JSON.parse(await readFile(join(out, 'diff.json'), 'utf8')) as { frames: FrameChange[]; scale: number };
  const frames = report.frames;
  const linq = frames.find((f) => f.frame === grind);
  assert.ok(linq, `${grind} among ${frames.slice(0, 10).map((f) => f.frame)}`);
  t.diagnostic(`Grind ${linq.before.inclusiveShare.toFixed(1)}% → ${linq.after.inclusiveShare.toFixed(1)}%`);
  // A fair share of 2 CPUs gives +16.7; the scheduler is not that fair to three busy threads and the runtime's own (seen
  // in CI: 50.3% → 74.5%, +24.2), so the bounds are what either recording can give, not the model's ± 7.
  assert.ok(linq.inclusivePoints >= 8 && linq.inclusivePoints <= 32, `Grind moved ${linq.inclusivePoints} points`);
  // Among the frames that grew most: Grind, and its own thread's frames above and below it, which grow with it.
  const grown = frames.filter((f) => f.inclusivePoints > 0).sort((a, b) => b.inclusivePoints - a.inclusivePoints);
  assert.ok(
    grown.slice(0, 10).includes(linq),
    grown
      .slice(0, 10)
      .map((f) => f.frame)
      .join('\n'),
  );
  // Little else: what moved by more than 3 points lies on linq's path (its thread, its callees) or generic's.
  // (Frames of each thread with names merged as the diff merges them.)
  const threadFrames = async (dir: string, thread: string) =>
    new Set(
      [
        ...diffStacks(
          parseFoldedText(await readFile(join(dir, layout.foldedStacks), 'utf8')).stacks,
          new Map(),
        ).stacks.keys(),
      ]
        .filter((stack) => stack.startsWith(`${thread};`))
        .flatMap((stack) => stack.split(';')),
    );
  const linqThread = await threadFrames(after, 'fixture-linq');
  const genericThread = await threadFrames(before, 'fixture-generic');
  const unexplained = frames.filter(
    (f) => Math.abs(f.inclusivePoints) > 3 && !(f.inclusivePoints > 0 ? linqThread : genericThread).has(f.frame),
  );
  assert.deepEqual(
    unexplained.map((f) => `${f.frame} ${f.inclusivePoints.toFixed(1)}`),
    [],
  );
  assert.ok(
    frames.some((f) => churn.test(f.frame) && f.inclusivePoints < -5),
    'generic’s Churn shrinks',
  );
  assert.match(run.stdout as string, /frames whose share moved most/);
  assert.match(run.stdout as string, /LinqMill::Grind/);

  // The CI gate: Grind grew by more than 10 points, not by more than 40.
  const gate = await runCli(['diff', before, after, '-o', out, '--fail-above', '10', '-q']);
  assert.equal(gate.exitCode, 4, gate.all);
  assert.match(gate.stderr as string, /LinqMill::Grind_\[j\] grew by [\d.]+ points .* more than --fail-above 10/);
  const pass = await runCli(['diff', before, after, '-o', out, '--fail-above', '40', '-q']);
  assert.equal(pass.exitCode, 0, pass.all);
});

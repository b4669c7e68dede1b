// `profcpu watch`'s command line without recording anything: usage errors (no trigger, a rules file and rule flags
// together, a rules file's mistakes named by field, a dump type profcpu does not know), and a rule's lifetime ending
// the watch by itself.
import assert from 'node:assert/strict';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { runCli } from '../support/cli.js';
import { tempDir } from '../support/temp.js';

test('usage errors exit 2 with the reason, naming the rules file’s field', async (t) => {
  const work = await tempDir(t, 'watch', '/var/tmp');
  const none = await runCli(['watch', '--output', work]);
  assert.equal(none.exitCode, 2, String(none.all));
  assert.match(
    String(none.stderr),
    /give --rules FILE, or one trigger: --cpu-above N, --every DURATION or --on-demand/,
  );

  const rules = join(work, 'rules.yaml');
  await writeFile(rules, 'rules:\n  - trigger: { type: cpu, above: 80, for: 30s }\n');
  const both = await runCli(['watch', '--rules', rules, '--cpu-above', '50']);
  assert.equal(both.exitCode, 2, String(both.all));
  assert.match(String(both.stderr), /--rules and --cpu-above/);

  await writeFile(rules, 'rules:\n  - trigger: { type: cpu, above: 80, for: 30 parsecs }\n');
  const typo = await runCli(['watch', '-rules', rules, '--output', work]);
  assert.equal(typo.exitCode, 2, String(typo.all));
  assert.match(String(typo.stderr), /error: rules: rules\[0\]\.trigger\.for: "30 parsecs" is not a duration/);

  await writeFile(rules, 'rules:\n  - trigger: { type: demand }\n    actions: [{ kind: dump, type: huge }]\n');
  const dump = await runCli(['watch', '--rules', rules, '--output', work]);
  assert.equal(dump.exitCode, 2, String(dump.all));
  assert.match(String(dump.stderr), /rules\[0\]\.actions\[0\]\.type: must be one of full, heap, mini, triage/);

  const flag = await runCli(['watch', '--cpu-above', '80', '--for', 'soon', '--output', work]);
  assert.equal(flag.exitCode, 2, String(flag.all));
  assert.match(String(flag.stderr), /rules\[0\]\.trigger\.for: "soon" is not a duration/);
});

test('a watch whose only rule’s lifetime is over ends by itself, exit 0, with an empty index given to the owner', async (t) => {
  const work = await tempDir(t, 'watch', '/var/tmp');
  const run = await runCli(
    ['watch', '--on-demand', '--pid', String(process.pid), '--lifetime', '2s', '--output', work, '--poll', '0.2'],
    { timeout: 60_000, env: { PROFCPU_OUTPUT_OWNER: '4321:4322' } },
  );
  assert.equal(run.exitCode, 0, String(run.all));
  assert.match(String(run.stderr), /rule rule1: lifetime of 2 s over, the rule ends/);
  assert.match(String(run.stderr), /watch: ended \(rules expired\) after 0 run\(s\)/);
  assert.deepEqual(JSON.parse(await readFile(join(work, 'index.json'), 'utf8')), { runs: [] });
  assert.match(await readFile(join(work, 'index.html'), 'utf8'), /<tbody>\n<\/tbody>/);
  // PROFCPU_OUTPUT_OWNER (the launcher's user): the watch folder, its index and triggers folder are theirs.
  if (process.getuid?.() === 0)
    for (const name of ['.', 'index.json', 'index.html', 'triggers'])
      assert.equal((await stat(join(work, name))).uid, 4321, name);
});

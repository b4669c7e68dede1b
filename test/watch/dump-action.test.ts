// A watch rule whose action is a dump: the .NET fixture app dumped on demand (SIGUSR1) into the run's folder, with
// the dump manifest `profcpu dump` writes, the dump starting with an ELF header (a core file), indexed and linked.
import assert from 'node:assert/strict';
import { open, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { startDotnetApp } from '../support/dotnet-app.js';
import { needDotnet, needRoot } from '../support/requirements.js';
import { startWatch } from './watch-support.js';
import { tempDir } from '../support/temp.js';

test('a dump action on demand: a mini dump of the .NET app in the run folder, with its manifest, indexed', async (t) => {
  if (!needRoot(t) || !needDotnet(t)) return;
  const work = await tempDir(t, 'watch', '/var/tmp');
  const gate = join(work, 'burn');
  const app = await startDotnetApp({ burnWhile: gate, workloads: ['generic'] });
  t.after(() => app.kill());
  const rules = join(work, 'rules.json');
  await writeFile(
    rules,
    JSON.stringify({
      rules: [
        {
          name: 'snap',
          filters: { pid: app.pid },
          trigger: { type: 'demand' },
          actions: [{ kind: 'dump', type: 'mini' }],
        },
      ],
    }),
  );
  const dir = join(work, 'watch');
  const watch = startWatch(t, dir, ['--rules', rules]);
  await watch.waitFor(new RegExp(`rule snap: watching process ${app.pid} `));
  watch.child.kill('SIGUSR1');
  await watch.waitFor(/rule snap: dump done: mini dump, [\d.]+ MiB on disk/, 180_000);
  watch.child.kill('SIGTERM');
  assert.equal(await watch.exited, 0, watch.log());

  const [run] = await watch.index();
  assert.equal(run?.status, 'done', JSON.stringify(run));
  assert.equal(run.action, 'dump');
  assert.equal(run.trigger.reason, 'on demand');
  const dump = join(dir, run.links!['dump']!);
  const file = await open(dump);
  const head = Buffer.alloc(4);
  await file.read(head, 0, 4, 0);
  await file.close();
  assert.deepEqual(head, Buffer.from([0x7f, 0x45, 0x4c, 0x46]), 'a core file (ELF)');
  const manifest = JSON.parse(await readFile(join(dir, run.links!['manifest']!), 'utf8')) as unknown;
  assert.match(JSON.stringify(manifest), /"mini"/);
  assert.match(await readFile(join(dir, 'index.html'), 'utf8'), new RegExp(`<a href="${run.id}/[^"]+">dump</a>`));
});

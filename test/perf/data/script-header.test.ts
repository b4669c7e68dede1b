// The native engine's `#` header against perf's own (`perf script --header-only`) on a real recording: every line
// it writes is perf's line, in perf's order, and it leaves out only the kinds of lines it does not claim to write
// (an event's attributes after its name, the clock's reference time, the missing features).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { readPerfDataFile } from '../../../src/perf/data/reader.js';
import { ScriptTextWriter } from '../../../src/perf/data/script-text.js';
import { needCommand, needRoot } from '../../support/requirements.js';

/** Lines of perf's header the writer does not write. */
const leftOut = [/^# clockid: /, /^# reference time: /, /^# missing features: /];

async function ourHeader(path: string): Promise<string[]> {
  let text = '';
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: () => undefined },
    { header: (header) => void (text = header), sample: () => {} },
  );
  await readPerfDataFile(path, { header: (header) => writer.header(header), event: () => {} });
  return text.split('\n').slice(0, -1);
}

test('the header of a whole-machine recording: the lines perf writes, in its order, events cut after their name', async (t) => {
  if (!needRoot(t) || !needCommand(t, 'perf', 'linux-perf')) return;
  const dir = await mkdtemp(join(tmpdir(), 'profcpu-script-header-'));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const output = join(dir, 'perf.data');
  await execa('perf', ['record', '-q', '-a', '-g', '-k', '1', '-F', '999', '-o', output, '--', 'sleep', '0.3']);

  const perfs = (await execa('perf', ['script', '--header-only', '-i', output])).stdout
    .split('\n')
    .filter((line) => !leftOut.some((kind) => kind.test(line)));
  const ours = await ourHeader(output);
  const events = ours.filter((line) => line.startsWith('# event : '));
  assert.ok(events.length > 0);
  // An event's line is perf's up to the end of its name.
  const cut = perfs.map((line, i) => (line.startsWith('# event : ') ? line.slice(0, ours[i]?.length) : line));
  assert.deepEqual(ours, cut);
  for (const fact of ['captured on', 'data offset', 'cpuid', 'total memory', 'pmu mappings', 'time of first sample'])
    assert.ok(
      ours.some((line) => line.startsWith(`# ${fact}`)),
      `no ${fact} line`,
    );
});

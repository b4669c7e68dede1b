// The built-in engine's `#` header against perf's own (`perf script --header-only`) on a real recording: the same
// lines when perf 6.1 recorded (the version whose header it writes whole); with another perf, every line it writes
// is perf's, in perf's order, and it leaves out only the kinds of lines it does not claim to write for that version
// (an event's attributes after its name, the missing features).
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { execa } from 'execa';
import { readPerfDataFile } from '../../src/engine/perf-data/reader.js';
import { ScriptTextWriter } from '../../src/engine/script-text.js';
import { fixed3 } from '../../src/engine/script-header.js';
import { perfVersion } from '../../src/perf/version.js';
import { canRecord } from '../support/requirements.js';
import { tempDir } from '../support/temp.js';

/** Lines of perf's header the writer writes for perf 6.1 only. */
const only61 = [/^# missing features: /];

async function ourHeader(path: string): Promise<string[]> {
  let text = '';
  const writer = new ScriptTextWriter(
    { kernel: () => undefined, file: () => undefined },
    { header: (header) => void (text = header), sample: () => {}, oneLine: () => {} },
  );
  await readPerfDataFile(path, { header: (header) => writer.header(header), event: () => {} });
  return text.split('\n').slice(0, -1);
}

test('the header of a whole-machine recording: the lines perf writes, in its order', async (t) => {
  if (!canRecord(t)) return;
  const dir = await tempDir(t, 'script-header');
  const output = join(dir, 'perf.data');
  await execa('perf', ['record', '-q', '-a', '-g', '-k', '1', '-F', '999', '-o', output, '--', 'sleep', '0.3']);

  const perfs = (await execa('perf', ['script', '--header-only', '-i', output])).stdout.split('\n');
  const ours = await ourHeader(output);
  assert.ok(ours.some((line) => line.startsWith('# event : ')));
  if (/^6\.1\./.test(await perfVersion())) assert.deepEqual(ours, perfs);
  else {
    // An event's line is perf's up to the end of its name.
    const kept = perfs.filter((line) => !only61.some((kind) => kind.test(line)));
    const cut = kept.map((line, i) => (line.startsWith('# event : ') ? line.slice(0, ours[i]?.length) : line));
    assert.deepEqual(ours, cut);
  }
  const facts = ['captured on', 'data offset', 'cpuid', 'total memory', 'pmu mappings', 'time of first', 'clockid: '];
  for (const fact of facts)
    assert.ok(
      ours.some((line) => line.startsWith(`# ${fact}`)),
      `no ${fact} line`,
    );
});

test('the sample duration is rounded as printf rounds it: exact ties to even, the rest by the double’s exact value', () => {
  // 299 505 500 ns is 299.50549999999998 ms as a double: below the tie, printf gives .505 (CI once saw .506 here).
  assert.equal(fixed3(299_505_500 / 1e6), '299.505');
  assert.equal(fixed3(0.0625), '0.062');
  assert.equal(fixed3(0.1875), '0.188');
  assert.equal(fixed3(2.0625), '2.062');
  assert.equal(fixed3(1.0005), '1.000');
  assert.equal(fixed3(299.5), '299.500');
});

// The stub table of an output folder is untrusted: a forged target/runtime-stubs.json (bad entries, huge counts,
// overlaps, a huge file, not JSON) is cut down to its sane ranges or refused, and the resolver names frames in the
// runtime's executable memory from what is left: `[stub: <kind>]`, counted apart from the unlogged stubs.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile, mkdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { OutputFolder } from '../../../src/files/output-folder.js';
import { createDotnetResolver, unloggedStubName } from '../../../src/dotnet/naming/resolver.js';
import {
  parseRuntimeStubTable,
  readRuntimeStubTable,
  runtimeStubStoreLimits,
  StubRangeIndex,
  writeRuntimeStubTable,
} from '../../../src/dotnet/runtime-stubs/runtime-stubs-store.js';
import { parseProcMapsLine, type ProcMapping } from '../../../src/target/proc-maps.js';

const deadline = { timeout: 30_000 };

test('a forged table keeps only its sane ranges, overlaps resolved', deadline, () => {
  const warnings: string[] = [];
  const table = parseRuntimeStubTable(
    {
      runtime: { version: '10.0.12\u001b[31m', source: 'contract descriptor' },
      ranges: [
        ['0x1000', '0x2000', 'fixup precode'],
        ['0x1800', '0x2800', 'fixup precode'], // overlaps, same kind: merged
        ['0x2400', '0x3000', 'write barrier'], // overlaps, other kind: cut
        ['0x5000', '0x4000', 'jump'], // end before start
        ['0x6000', '0x7000', '__proto__'], // not a kind name
        ['0x6000', '0x7000', 'a'.repeat(33)],
        ['0x10000000000000000', '0x10000000000000001', 'jump'], // past 64 bits
        ['4096', '8192', 'jump'], // not hex
        [4096, 8192, 'jump'],
        ['0x8000', '0x9000'],
        { start: '0x8000' },
        null,
      ],
    },
    (m) => warnings.push(m),
  );
  assert.deepEqual(
    table?.ranges.map((r) => [r.start, r.end, r.kind]),
    [
      [0x1000n, 0x2800n, 'fixup precode'],
      [0x2800n, 0x3000n, 'write barrier'],
    ],
  );
  assert.equal(table?.runtimeVersion, undefined, 'a version with control characters is dropped');
  assert.equal(table?.source, 'contract descriptor');
  assert.match(warnings.join('\n'), /9 ranges were not usable/);
  assert.equal(
    parseRuntimeStubTable({ ranges: 'all' }, () => {}),
    undefined,
  );
  assert.equal(
    parseRuntimeStubTable(null, () => {}),
    undefined,
  );
});

test('a table of more ranges than the cap keeps the cap; a huge or broken file is not used', deadline, async () => {
  const many = Array.from({ length: runtimeStubStoreLimits.maxRanges + 10 }, (_, i) => [
    `0x${(0x1000 * (i + 1)).toString(16)}`,
    `0x${(0x1000 * (i + 1) + 0x10).toString(16)}`,
    'jump',
  ]);
  const warnings: string[] = [];
  const table = parseRuntimeStubTable({ ranges: many }, (m) => warnings.push(m));
  assert.equal(table?.ranges.length, runtimeStubStoreLimits.maxRanges);
  assert.match(warnings.join('\n'), /more than 200000 ranges/);

  const dir = await mkdtemp(join(tmpdir(), 'profcpu-stubs-'));
  try {
    await mkdir(join(dir, 'target'));
    const folder = await OutputFolder.open(dir);
    try {
      await writeFile(join(dir, 'target/runtime-stubs.json'), '{"ranges": [');
      const seen: string[] = [];
      assert.equal(await readRuntimeStubTable(folder, (m) => seen.push(m)), undefined);
      assert.match(seen.join('\n'), /not JSON/);
      await writeFile(join(dir, 'target/runtime-stubs.json'), Buffer.alloc(runtimeStubStoreLimits.fileBytes + 1, 32));
      assert.equal(await readRuntimeStubTable(folder, (m) => seen.push(m)), undefined);
      assert.match(seen.join('\n'), /larger than/);
      // What the step writes reads back the same.
      const ranges = [{ start: 0x7f00_0000_0000n, end: 0x7f00_0000_1000n, kind: 'write barrier' }];
      await writeRuntimeStubTable(folder, { ranges, runtimeVersion: '10.0.12', source: 'contract descriptor' }, {});
      assert.deepEqual((await readRuntimeStubTable(folder, () => {}))?.ranges, ranges);
    } finally {
      await folder.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('the resolver names frames in runtime memory from the table, and only there', deadline, () => {
  const mappings = [
    '7f53b9e40000-7f53b9e41000 r-xs 00000000 00:01 1251 /memfd:doublemapper (deleted)',
    '7f53bae90000-7f53baf10000 r-xp 00000000 00:00 0 ',
    '7f5400000000-7f5400100000 r-xp 00000000 fe:00 12 /usr/lib/libc.so.6',
  ].map((l) => parseProcMapsLine(l)!) as ProcMapping[];
  const stubs = new StubRangeIndex([
    { start: 0x7f53b9e40000n, end: 0x7f53b9e41000n, kind: 'write barrier' },
    { start: 0x7f53bae90018n, end: 0x7f53bae90418n, kind: 'virtual dispatch' },
    { start: 0x7f5400000000n, end: 0x7f5400100000n, kind: 'jump' }, // forged over libc: not used
  ]);
  const symbols = [{ start: 0x7f53bae91000n, size: 0x100n, name: 'void [App] App::Main()' }];
  const r = createDotnetResolver({ symbols, mappings, stubs });
  // perf 6.1 prints memfd frames as offsets into the memfd.
  assert.equal(
    r.resolve({ pid: undefined, ip: 0x40n, dso: '/memfd:doublemapper (deleted)' })?.name,
    '[stub: write barrier]',
  );
  assert.equal(r.resolve({ pid: undefined, ip: 0x7f53bae90100n, dso: '[unknown]' })?.name, '[stub: virtual dispatch]');
  assert.equal(r.resolve({ pid: undefined, ip: 0x7f53bae95000n, dso: '[unknown]' })?.name, unloggedStubName);
  assert.equal(r.resolve({ pid: undefined, ip: 0x7f5400000100n, dso: '[unknown]' }), undefined);
  assert.deepEqual([r.stats.stubsFromMemory, r.stats.unloggedStubs, r.stats.noSymbol], [2, 1, 1]);
});

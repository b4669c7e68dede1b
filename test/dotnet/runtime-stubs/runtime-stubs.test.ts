// The stub table read from a live .NET 8, 9 and 10 process (the fixture app) against an oracle profcpu did not write: the
// runtime's own perf map, with DOTNET_PerfMapEnabled=1 and DOTNET_PerfMapStubGranularity=2, logs each stub with the
// name of what made it (`stub FixupPrecode<FixupPrecode>`, `stub ...<GenerateDispatchStub>`). Every stub it logged
// at an address the process maps executable must lie in a range of the table whose kind matches (runtimeNames below
// is the mapping). The perf map is read before the memory, so every stub it names existed when the table was read.
// .NET 8 and 9 do not log the write barriers' copy. Not checked: the `DynamicHelper` entries, which .NET 10.0.12 logs
// at addresses it never maps executable (the writable view's, seen unmapped), and are so outside any table. Also: 8 and
// 9 without their version, and a start time not the process's (its pid reused), are skipped, saying why. .NET 8 and 9
// log no stub linker stubs (their libcoreclr.so holds neither `DelegateShuffleThunk` nor `InstantiatingStub`): there,
// and on 10 too, a second oracle checks the `stub linker` ranges, ClrMD (Microsoft's DAC-based reader, from NuGet),
// whose every stub heap range must lie in them; the table is read again after ClrMD, so none of its blocks is newer.
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { readRuntimeStubs } from '../../../src/dotnet/runtime-stubs/runtime-stubs-step.js';
import { isExecutable, parseProcMaps, ProcMapsIndex } from '../../../src/target/proc-maps.js';
import { readStat } from '../../../src/target/procfs.js';
import { TargetFiles } from '../../../src/target/target-files.js';
import { readStubHeaps } from '../../support/clrmd-reader.js';
import { dotnetVersions, startDotnetApp, type DotnetVersion } from '../../support/dotnet-app.js';
import { needDotnet } from '../../support/requirements.js';

/** The runtime's perf-map names of stubs (the part in angle brackets) and the kinds profcpu may give them. */
const runtimeNames: Record<string, readonly string[]> = {
  JIT_CopiedWriteBarriers: ['write barrier'],
  FixupPrecode: ['fixup precode'],
  StubPrecode: ['stub precode'],
  PInvokeImportPrecode: ['stub precode'],
  // .NET 8 names stub and fixup precode alike.
  PRECODE_STUB: ['stub precode', 'fixup precode'],
  GenerateDispatchStub: ['virtual dispatch'],
  GenerateResolveStub: ['virtual resolve'],
  GenerateLookupStub: ['virtual lookup'],
  GenerateVTableCallStub: ['virtual vtable'],
  DelegateShuffleThunk: ['stub linker'],
  InstantiatingStub: ['stub linker'],
};

/** Names each version's fixture is known to log (and so must be checked), seen on 8.0, 9.0 and 10.0.12. */
const expectedNames: Record<DotnetVersion, readonly string[]> = {
  8: ['PRECODE_STUB', 'GenerateDispatchStub'],
  9: ['GenerateDispatchStub', 'GenerateVTableCallStub'],
  10: ['JIT_CopiedWriteBarriers', 'FixupPrecode', 'GenerateDispatchStub', 'DelegateShuffleThunk'],
};

for (const version of dotnetVersions) {
  test(
    `.NET ${version}: the stub table read from memory agrees with the runtime’s own perf map`,
    { timeout: 240_000 },
    async (t) => {
      if (!needDotnet(t)) return;
      const app = await startDotnetApp({
        version,
        env: { DOTNET_PerfMapEnabled: '1', DOTNET_PerfMapStubGranularity: '2' },
        workloads: ['generic', 'async', 'linq'],
      });
      t.after(() => app.kill());
      const perfMap = await readFile(`/tmp/perf-${app.pid}.map`, 'utf8');
      const maps = new ProcMapsIndex(parseProcMaps(await readFile(`/proc/${app.pid}/maps`, 'utf8')).mappings);
      const files = await TargetFiles.open(app.pid);
      t.after(() => files.close());
      // A self-contained app's path names no version: collect has it from inspect, the test from the build. Without it
      // .NET 8 and 9 (whose layout depends on it) are skipped, saying so.
      if (version < 10) {
        const unknown = await readRuntimeStubs(app.pid, files);
        assert.match('skipped' in unknown ? unknown.skipped : 'read', /libcoreclr\.so is unknown, and before \.NET 10/);
      }
      const startTicks = (await readStat(app.pid))!.startTicks;
      // Another start time than the inspected one: the pid belongs to another process now, nothing is read.
      const reused = await readRuntimeStubs(app.pid, files, { version: `${version}.0`, startTicks: startTicks + 1 });
      assert.match('skipped' in reused ? reused.skipped : 'read', /is another process now/);
      const read = await readRuntimeStubs(app.pid, files, { version: `${version}.0`, startTicks });
      if ('skipped' in read) assert.fail(read.skipped);
      const ranges = read.walk.ranges;
      const find = (address: bigint) => ranges.find((r) => address >= r.start && address < r.end);

      const checked: Record<string, number> = {};
      const wrong: string[] = [];
      for (const line of perfMap.split('\n')) {
        // `stub Owner<Name>` (.NET 10), `stub<N> Owner<Name>` (8, 9).
        const m = /^(?:0x)?([0-9a-f]+) [0-9a-f]+ stub(?:<\d+>)? \S*<(\w+)>$/i.exec(line);
        if (!m) continue;
        const address = BigInt(`0x${m[1]!}`);
        const owner = m[2]!;
        const mapping = maps.find(address);
        if (!mapping || !isExecutable(mapping)) continue;
        const expected = runtimeNames[owner];
        const found = find(address);
        if (expected === undefined || !expected.includes(found?.kind ?? ''))
          wrong.push(
            `${line} -> ${found?.kind ?? 'no range'} (expected ${expected?.join(' or ') ?? 'a mapping for this name'})`,
          );
        checked[owner] = (checked[owner] ?? 0) + 1;
      }
      assert.deepEqual(wrong.slice(0, 20), [], `${wrong.length} logged stubs disagree`);
      const heaps = await readStubHeaps(app.pid);
      assert.ok(heaps.length > 0, 'ClrMD found a stub heap');
      const again = await readRuntimeStubs(app.pid, files, { version: `${version}.0`, startTicks });
      if ('skipped' in again) assert.fail(again.skipped);
      const linker = again.walk.ranges.filter((r) => r.kind === 'stub linker');
      const outside = heaps.filter((h) => !linker.some((r) => h.start >= r.start && h.end <= r.end));
      assert.deepEqual(
        outside.map((h) => `0x${h.start.toString(16)}-0x${h.end.toString(16)}`),
        [],
        `ClrMD's stub heaps outside the stub linker ranges ${JSON.stringify(linker.map((r) => r.start.toString(16)))}`,
      );
      for (const owner of expectedNames[version])
        assert.ok((checked[owner] ?? 0) > 0, `${owner} was logged and checked: ${JSON.stringify(checked)}`);
      t.diagnostic(
        `${ranges.length} ranges, ${heaps.length} ClrMD stub heaps in ${linker.length} stub linker ranges, ${read.bytesRead} bytes in ${read.reads} reads, ${read.ms} ms; checked ${JSON.stringify(checked)}`,
      );
    },
  );
}

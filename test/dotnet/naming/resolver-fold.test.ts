// The resolver inside the fold stage, on a sample as perf 6.1 printed it for the .NET fixture recorded from a sidecar
// (W^X on): five JIT frames in memfd:doublemapper and one ReadyToRun frame in System.Private.CoreLib.dll, all
// `[unknown]` to perf, named from an output folder's snapshots (addresses and names as they were in that recording).
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { StackFolder, type FoldResult } from '../../../src/stacks/fold.js';
import { loadFolderResolver } from '../../../src/dotnet/naming/folder-resolver.js';
import { tempDir } from '../../support/temp.js';

const runtime = '/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12';
const memfd = '/memfd:doublemapper (deleted)';
const sample = [
  'fixture-linq    13  2206.053349:   10101010 cpu-clock: ',
  `\t          1489d4 [unknown] (${memfd})`,
  `\t          147f25 [unknown] (${memfd})`,
  `\t          1442c0 [unknown] (${memfd})`,
  `\t          11469e [unknown] (${memfd})`,
  `\t          114534 [unknown] (${memfd})`,
  `\t          229756 [unknown] (${runtime}/System.Private.CoreLib.dll)`,
  `\t          5fa3cc [unknown] (${runtime}/libcoreclr.so)`,
  `\t          458305 [unknown] (${runtime}/libcoreclr.so)`,
  '\t           891f5 start_thread+0x305 (/usr/lib/x86_64-linux-gnu/libc.so.6)',
  '',
  '',
].join('\n');

const maps = [
  `7f22f1c60000-7f22f27ac000 r-xp 00000000 fe:00 350922 ${runtime}/System.Private.CoreLib.dll`,
  `7f22f2c70000-7f22f2caf000 r-xs 00111000 00:01 5256 ${memfd}`,
  `7f22f3f70000-7f22f3faf000 rw-s 00111000 00:01 5256 ${memfd}`,
].join('\n');

// memfd offset o is at 0x7f22f2c70000 + (o - 0x111000).
const perfMap = [
  '0x7f22f2ca7800 1400 instance !1[] [System.Linq] System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon]::ToArrayNoPresizing()[OptimizedTier1]',
  '0x7f22f2ca6e00 200 instance !1[] [System.Linq] System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon]::ToArray()[OptimizedTier1]',
  '0x7f22f2ca3200 1100 int64 [ProfcpuFixture] ProfcpuFixture.LinqMill::Grind(int32)[OptimizedTier1]',
  '0x7f22f2c73600 1100 void [ProfcpuFixture] ProfcpuFixture.Workloads::Run(string,class [System.Threading]System.Threading.CountdownEvent,valuetype [System.Runtime]System.Threading.CancellationToken)[QuickJitted]',
  '0x7f22f2c73500 80 instance void [ProfcpuFixture] ProfcpuFixture.Program+<>c__DisplayClass0_1::<Main>b__0()[QuickJitted]',
  '',
].join('\n');

function jitDump(start: bigint, size: number, name: string): Buffer {
  const header = Buffer.alloc(40);
  header.writeUInt32LE(0x4a695444, 0);
  header.writeUInt32LE(1, 4);
  header.writeUInt32LE(40, 8);
  const nameBytes = Buffer.from(name + '\0');
  const record = Buffer.alloc(56);
  record.writeUInt32LE(56 + nameBytes.length, 4);
  record.writeBigUInt64LE(start, 24);
  record.writeBigUInt64LE(start, 32);
  record.writeBigUInt64LE(BigInt(size), 40);
  return Buffer.concat([header, record, nameBytes]);
}

test('a sample perf left unnamed comes out of the fold fully named but for libcoreclr.so', async (t) => {
  const dir = await tempDir(t, 'resolver-fold');
  await mkdir(join(dir, 'target'));
  await writeFile(join(dir, 'target/target.json'), JSON.stringify({ pid: 1, nspid: 1, runtime: 'dotnet' }));
  await writeFile(join(dir, 'target/perf-1.map'), perfMap);
  await writeFile(
    join(dir, 'target/jit-1.dump'),
    jitDump(
      0x7f22f1e89700n,
      0x80,
      'instance void [System.Private.CoreLib] System.Threading.Thread::StartCallback()[PreJIT]',
    ),
  );
  await writeFile(join(dir, 'target/maps'), maps);
  const resolver = await loadFolderResolver(dir);
  assert.ok(resolver);

  // Whole, and cut in 1-byte and 7-byte chunks: the result must not depend on where chunks end.
  for (const size of [sample.length, 1, 7]) {
    const folder: StackFolder = new StackFolder({}, undefined, resolver);
    const bytes = Buffer.from(sample);
    for (let i = 0; i < bytes.length; i += size) folder.write(bytes.subarray(i, i + size));
    const { stacks, quality }: FoldResult = folder.end();
    const stack: string | undefined = [...stacks.keys()][0];
    assert.equal(
      stack,
      [
        'fixture-linq',
        'start_thread',
        '[libcoreclr.so]',
        '[libcoreclr.so]',
        'System.Threading.Thread::StartCallback_[j]',
        'ProfcpuFixture.Program+<>c__DisplayClass0_1::<Main>b__0_[j]',
        'ProfcpuFixture.Workloads::Run_[j]',
        'ProfcpuFixture.LinqMill::Grind_[j]',
        'System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon]::ToArray_[j]',
        'System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon]::ToArrayNoPresizing_[j]',
      ].join(';'),
    );
    assert.equal(quality.framesByKind.jit, 5);
    assert.equal(quality.framesByKind.readytorun, 1);
    assert.deepEqual([quality.samples, quality.fullyNamed, quality.fullyNamedExceptCoreclr], [1, 0, 1]);
  }
});

import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { loadFolderResolver } from '../../../src/dotnet/naming/folder-resolver.js';
import { tempDir } from '../../support/temp.js';

function jitDump(records: { start: bigint; size: number; name: string }[]): Buffer {
  const header = Buffer.alloc(40);
  header.writeUInt32LE(0x4a695444, 0);
  header.writeUInt32LE(1, 4);
  header.writeUInt32LE(40, 8);
  header.writeUInt32LE(62, 12);
  const parts = [header];
  records.forEach((r, i) => {
    const name = Buffer.from(r.name + '\0');
    const fixed = Buffer.alloc(56);
    fixed.writeUInt32LE(56 + name.length, 4);
    fixed.writeBigUInt64LE(r.start, 24);
    fixed.writeBigUInt64LE(r.start, 32);
    fixed.writeBigUInt64LE(BigInt(r.size), 40);
    fixed.writeBigUInt64LE(BigInt(i + 1), 48);
    parts.push(fixed, name);
  });
  return Buffer.concat(parts);
}

async function folder(t: { after: (f: () => Promise<void>) => void }, files: Record<string, string | Buffer>) {
  const dir = await tempDir(t, 'bundle-resolver');
  await mkdir(join(dir, 'target'));
  for (const [name, content] of Object.entries(files)) await writeFile(join(dir, name), content);
  return dir;
}

const maps =
  '7f0000100000-7f0000110000 r-xs 00010000 00:01 36 /memfd:doublemapper (deleted)\n' +
  '7f0000200000-7f0000300000 r-xp 00000000 fe:00 9 /usr/share/dotnet/shared/System.Private.CoreLib.dll\n';
const stub = { start: 0x7f0000100000n, size: 0x10000, name: 'stub ReportStubBlock<Unknown>' };
const method = { start: 0x7f0000100100n, size: 0x80, name: 'void [App] App.P::Main()[QuickJitted]' };
const r2r = { start: 0x7f0000200400n, size: 0x40, name: 'void [System.Private.CoreLib] S.T::M()[PreJIT]' };
const mapLine = (s: typeof stub) => `${s.start.toString(16)} ${s.size.toString(16)} ${s.name}\n`;

test('reads the snapshots named after target.json and resolves JIT and ReadyToRun frames', async (t) => {
  const dir = await folder(t, {
    'target/target.json': JSON.stringify({ pid: 4321, nspid: 1 }),
    'target/perf-1.map': mapLine(stub) + mapLine(method),
    // The jitdump repeats the perf map's entries, in the same order, and adds the ReadyToRun method.
    'target/jit-1.dump': jitDump([stub, method, r2r]),
    'target/maps': maps,
  });
  const warnings: string[] = [];
  const loaded = await loadFolderResolver(dir, (m) => warnings.push(m));
  assert.ok(loaded);
  assert.deepEqual(warnings, []);
  assert.deepEqual(loaded.sources.pids, [4321, 1]);
  assert.equal(loaded.sources.runtime, undefined);
  assert.equal(loaded.sources.jitDump?.readyToRun, 1);
  const resolver = loaded;
  // The method inside the stub block keeps its own name: the jitdump's copy of the block does not hide it.
  assert.equal(resolver.resolve({ pid: 1, ip: 0x10110n, dso: '/memfd:doublemapper (deleted)' })?.name, method.name);
  assert.equal(resolver.resolve({ pid: 4321, ip: 0x10010n, dso: '/memfd:doublemapper (deleted)' })?.name, stub.name);
  assert.deepEqual(
    resolver.resolve({ pid: 1, ip: 0x410n, dso: '/usr/share/dotnet/shared/System.Private.CoreLib.dll' }),
    { name: r2r.name, kind: 'readytorun' },
  );
  assert.equal(resolver.resolve({ pid: 99, ip: 0x10110n, dso: '/memfd:doublemapper (deleted)' }), undefined);
});

test('without target.json takes the single snapshot there; warns about what is missing or damaged', async (t) => {
  const dir = await folder(t, {
    'target/perf-77.map': mapLine(method),
    'target/jit-77.dump': 'not a jitdump at all, this is text long enough for a header',
  });
  const warnings: string[] = [];
  const loaded = await loadFolderResolver(dir, (m) => warnings.push(m));
  assert.ok(loaded);
  assert.equal(loaded.sources.perfMap?.symbols, 1);
  assert.equal(loaded.sources.jitDump, undefined);
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /jit-77\.dump.*not a jitdump.*ReadyToRun frames stay unnamed/);
  assert.match(warnings[1]!, /target\/maps/);
  assert.equal(loaded.resolve({ pid: 5, ip: method.start, dso: '[unknown]' })?.name, method.name);
});

test('nothing to name with: for a .NET target a resolver that only carries what was missing; else undefined', async (t) => {
  const dotnet = await folder(t, {
    'target/maps': maps,
    'target/target.json': JSON.stringify({ pid: 5, nspid: 1, runtime: 'dotnet' }),
  });
  const warnings: string[] = [];
  const loaded = await loadFolderResolver(dotnet, (m) => warnings.push(m));
  assert.deepEqual(loaded?.sources, { pids: [5, 1], runtime: 'dotnet' });
  assert.equal(loaded?.resolve({ pid: 5, ip: 0x7f0000100100n, dso: '[unknown]' }), undefined);
  assert.match(warnings[0]!, /no perf map or jitdump/);

  const other = await folder(t, { 'target/maps': maps });
  assert.equal(await loadFolderResolver(other, (m) => warnings.push(m)), undefined);
  assert.equal(warnings.length, 1);
});

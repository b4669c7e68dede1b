// The ReadyToRun name tables in an output folder: written, read back and asked by file offset (what perf prints for
// a frame in an assembly's mapping); the resolver names such frames from them when the jitdump has nothing; and a
// received folder's index and tables cannot make the reader follow a path out, or decompress without bound.
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { gzipSync } from 'node:zlib';
import { OutputFolder } from '../../../src/files/output-folder.js';
import type { ReadyToRunNames } from '../../../src/dotnet/readytorun/readytorun.js';
import {
  loadImageNames,
  readReadyToRunIndex,
  writeReadyToRunIndex,
  writeReadyToRunTable,
} from '../../../src/dotnet/readytorun/readytorun-store.js';
import { createDotnetResolver } from '../../../src/dotnet/naming/resolver.js';
import { parseProcMaps } from '../../../src/target/proc-maps.js';

const coreLib = '/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/System.Private.CoreLib.dll';
const mvid = '0123456789abcdef0123456789abcdef';
const names: ReadyToRunNames = {
  assembly: 'System.Private.CoreLib',
  mvid,
  // Text at RVA 0x10400 from file offset 0x400, as crossgen2 lays out images for Linux.
  sections: [{ name: '.text', virtualAddress: 0x10400, virtualSize: 0x9000, rawOffset: 0x400, rawSize: 0x9000 }],
  methods: [
    { start: 0x10400, end: 0x10480, name: 'int32 [System.Private.CoreLib] Interop+Sys::Send(int32)[PreJIT]' },
    { start: 0x10480, end: 0x10500, name: 'void [System.Private.CoreLib] Evil::Line\nbreak()[PreJIT]' },
  ],
  unnamed: 0,
};

async function withFolder(work: (folder: OutputFolder, dir: string) => Promise<void>): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'profcpu-r2r-store-'));
  mkdirSync(join(dir, 'target'));
  const folder = await OutputFolder.open(dir);
  try {
    await work(folder, dir);
  } finally {
    await folder.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('a table written is read back and looked up by file offset; names cannot add lines', async () => {
  await withFolder(async (folder) => {
    const entry = await writeReadyToRunTable(folder, coreLib, names);
    await writeReadyToRunIndex(folder, [entry]);
    const warnings: string[] = [];
    const [image] = await loadImageNames(folder, (w) => warnings.push(w));
    assert.deepEqual(warnings, []);
    assert.equal(image!.lookupFileOffset(0x410n), names.methods[0]!.name);
    assert.equal(image!.lookupFileOffset(0x480n), 'void [System.Private.CoreLib] Evil::Line?break()[PreJIT]');
    assert.equal(image!.lookupFileOffset(0x500n), undefined);
    assert.equal(image!.lookupFileOffset(0x10n), undefined);
  });
});

test('the resolver names a frame in an assembly mapping from the image when the jitdump has nothing', async () => {
  await withFolder(async (folder) => {
    await writeReadyToRunIndex(folder, [await writeReadyToRunTable(folder, coreLib, names)]);
    const assemblies = await loadImageNames(folder, () => {});
    // The r-xp mapping starts one 64 KiB page into the image, at file offset 0.
    const mappings = parseProcMaps(`7fe1b8870000-7fe1b93bc000 r-xp 00000000 fe:00 350922 ${coreLib}\n`).mappings;
    const resolver = createDotnetResolver({ symbols: [], mappings, assemblies });
    // perf 6.1 prints the file offset; newer perf the address.
    assert.equal(resolver.resolve({ pid: 1, ip: 0x420n, dso: coreLib })?.name, names.methods[0]!.name);
    assert.equal(resolver.resolve({ pid: 1, ip: 0x7fe1b8870420n, dso: coreLib })?.kind, 'readytorun');
    assert.equal(
      resolver.resolve({ pid: 1, ip: 0x420n, dso: '/other/root/System.Private.CoreLib.dll' })?.name,
      names.methods[0]!.name,
    );
    assert.equal(resolver.resolve({ pid: 1, ip: 0x9000n, dso: coreLib }), undefined);
    assert.equal(resolver.stats.readytorunFromImage, 3);
  });
});

test('a received index is checked: paths out of the folder, bad ids and odd sections are dropped', async () => {
  await withFolder(async (folder, dir) => {
    const good = await writeReadyToRunTable(folder, coreLib, names);
    const entries = [
      good,
      { ...good, file: '../../etc/passwd' },
      { ...good, mvid: '../x', file: 'target/readytorun/../x.map.gz' },
      { ...good, sections: [[1, 2, 3]] },
      { ...good, sections: [[1, 2, 3, -4]] },
      { ...good, path: 5 },
    ];
    writeFileSync(join(dir, 'target/readytorun.json'), JSON.stringify({ images: entries }));
    const read = await readReadyToRunIndex(folder);
    assert.deepEqual(read, [good]);
    writeFileSync(join(dir, 'target/readytorun.json'), 'not json');
    assert.deepEqual(await readReadyToRunIndex(folder), []);
  });
});

test('a table that decompresses past the cap is refused with a warning, not read', async () => {
  await withFolder(async (folder, dir) => {
    const entry = await writeReadyToRunTable(folder, coreLib, names);
    await writeReadyToRunIndex(folder, [entry]);
    // 300 MiB of zeros compress to about 300 KB.
    writeFileSync(join(dir, entry.file), gzipSync(Buffer.alloc(300 << 20)));
    const warnings: string[] = [];
    assert.deepEqual(await loadImageNames(folder, (w) => warnings.push(w)), []);
    assert.match(warnings.join('\n'), /frames stay unnamed/);
  });
});

test(
  'a sent index listing one big table 4096 times loads it once, within a deadline and a memory bound',
  { timeout: 60_000 },
  async () => {
    await withFolder(async (folder, dir) => {
      // The reviewer's case: a 15 MiB table (1.5 MiB gzipped) took 0.3 s and 30 MiB per entry, 120 GiB for 4096.
      const lines: string[] = [];
      for (let i = 0; i < 300_000; i++)
        lines.push(`${(0x1000 + i * 16).toString(16)} 10 [Hostile] Type::Method_${i}()`);
      mkdirSync(join(dir, 'target/readytorun'));
      writeFileSync(join(dir, `target/readytorun/${mvid}.map.gz`), gzipSync(`${lines.join('\n')}\n`));
      const entry = {
        path: '/app/x.dll',
        mvid,
        file: `target/readytorun/${mvid}.map.gz`,
        assembly: 'x',
        methods: 1,
        sections: [[0, 1 << 30, 0, 1 << 30]],
      };
      // Repeated as is, and under 4096 paths (each a real mapping of the same table, say).
      const images = [
        ...Array.from({ length: 4096 }, () => entry),
        ...Array.from({ length: 4096 }, (_, i) => ({ ...entry, path: `/app/${i}/x.dll` })),
      ];
      writeFileSync(join(dir, 'target/readytorun.json'), JSON.stringify({ images }));
      const before = process.memoryUsage().rss;
      const warnings: string[] = [];
      const loaded = await loadImageNames(folder, (w) => warnings.push(w));
      assert.deepEqual(warnings, []);
      // The index keeps its first 4096 entries, of which one path is kept once.
      assert.equal(loaded.length, 1);
      assert.equal(loaded[0]!.lookupFileOffset(0x1000n + 16n * 299_999n), '[Hostile] Type::Method_299999()');
      writeFileSync(join(dir, 'target/readytorun.json'), JSON.stringify({ images: images.slice(4096) }));
      const sharedWarnings: string[] = [];
      const shared = await loadImageNames(folder, (w) => sharedWarnings.push(w));
      assert.deepEqual(sharedWarnings, []);
      assert.equal(shared.length, 4096);
      assert.equal(shared[4095]!.lookupFileOffset(0x1010n), '[Hostile] Type::Method_1()');
      // One table kept (about 40 MiB once) rather than 4096 copies.
      assert.ok(
        process.memoryUsage().rss - before < 1 << 30,
        `rss grew by ${process.memoryUsage().rss - before} bytes`,
      );
    });
  },
);

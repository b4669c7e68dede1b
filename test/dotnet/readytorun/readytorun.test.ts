// The ReadyToRun reader against the runtime itself: the .NET fixture runs with its jitdump on (DOTNET_PerfMapEnabled=2),
// which logs every precompiled method it runs, with its address and the name the runtime gives it; the names read
// from the images must be those, at those addresses, every one. Then the attacker's case: images cut short, bytes
// flipped, tables that claim more than they hold: the reader ends with a BAD_INPUT error or a result, quickly.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { isProfcpuError } from '../../../src/error.js';
import { parseJitDump } from '../../../src/formats/jit/jitdump.js';
import { fileOffsetToRva } from '../../../src/dotnet/readytorun/pe-image.js';
import {
  NotReadyToRunError,
  readReadyToRunNames,
  type ReadyToRunNames,
} from '../../../src/dotnet/readytorun/readytorun.js';
import { parseProcMaps } from '../../../src/target/proc-maps.js';
import { buildDotnetApp, sharedFramework, startDotnetApp } from '../../support/dotnet-app.js';
import { lookup, random } from './readytorun-support.js';
import { need, needDotnet } from '../../support/requirements.js';

test('every precompiled method the runtime logs is named from its image, same name, same start', async (t) => {
  if (!needDotnet(t, 'to build the fixture app')) return;
  await buildDotnetApp();
  const app = await startDotnetApp({ env: { DOTNET_PerfMapEnabled: '2', DOTNET_PerfMapStubGranularity: '2' } });
  let maps: string;
  try {
    maps = readFileSync(`/proc/${app.pid}/maps`, 'utf8');
  } finally {
    await app.kill();
  }
  const dump = parseJitDump(readFileSync(`/tmp/jit-${app.nspid}.dump`));
  const mappings = parseProcMaps(maps).mappings;
  const images = new Map<string, ReadyToRunNames>();
  let compared = 0;
  const wrong: string[] = [];
  for (const symbol of dump.symbols) {
    if (!symbol.name.endsWith('[PreJIT]')) continue;
    const m = mappings.find((x) => symbol.start >= x.start && symbol.start < x.end && x.path.endsWith('.dll'));
    assert.ok(m, `${symbol.name} lies in an assembly's mapping`);
    let names = images.get(m.path);
    if (!names) images.set(m.path, (names = readReadyToRunNames(readFileSync(m.path))));
    const rva = fileOffsetToRva(names.sections, Number(symbol.start - m.start + m.offset));
    const found = rva === undefined ? undefined : lookup(names, rva);
    compared++;
    if (found?.name !== symbol.name || found.start !== rva)
      wrong.push(`${symbol.name}\n   image: ${found ? `${found.name} at +${rva! - found.start}` : 'nothing'}`);
  }
  assert.ok(compared > 300, `the runtime logged ${compared} precompiled methods (expected hundreds)`);
  assert.ok(images.size >= 3, `${images.size} assemblies compared`);
  assert.deepEqual(wrong, [], `${wrong.length} of ${compared} differ`);
});

test('every assembly of the shared framework is read: named, or IL only', (t) => {
  const dir = sharedFramework();
  if (!need(t, dir !== undefined, 'the .NET shared framework (dotnet)')) return;
  let readyToRun = 0;
  for (const file of readdirSync(dir!).filter((f) => f.endsWith('.dll'))) {
    try {
      const names = readReadyToRunNames(readFileSync(join(dir!, file)));
      assert.equal(names.unnamed, 0, `${file}: every entry point named`);
      assert.match(names.mvid, /^[0-9a-f]{32}$/);
      readyToRun++;
    } catch (error) {
      assert.ok(error instanceof NotReadyToRunError, `${file}: ${(error as Error).message}`);
    }
  }
  assert.ok(readyToRun > 50, `${readyToRun} ReadyToRun assemblies`);
});

test('an IL-only assembly is refused as such', async (t) => {
  if (!needDotnet(t, 'to build the fixture app')) return;
  const executable = await buildDotnetApp();
  assert.throws(() => readReadyToRunNames(readFileSync(`${executable}.dll`)), NotReadyToRunError);
});

function readsOrRefuses(bytes: Buffer, what: string): void {
  try {
    readReadyToRunNames(bytes);
  } catch (error) {
    assert.ok(isProfcpuError(error, 'BAD_INPUT'), `${what}: ${(error as Error).stack}`);
  }
}

test(
  'hostile images: cut anywhere, bytes flipped, counts and offsets made huge: refused or read, never a crash',
  { timeout: 120_000 },
  (t) => {
    const dir = sharedFramework();
    if (!need(t, dir !== undefined, 'the .NET shared framework (dotnet)')) return;
    const original = readFileSync(join(dir!, 'System.Threading.dll'));
    const next = random(20261124);
    for (let i = 0; i < 300; i++) {
      const cut = Math.floor(next() * original.length);
      readsOrRefuses(original.subarray(0, cut), `cut at ${cut}`);
    }
    // Flips concentrated in the first 64 KiB, where the headers and most tables are.
    for (let i = 0; i < 1500; i++) {
      const bytes = Buffer.from(original);
      for (let j = 0; j < 4; j++) {
        const at = Math.floor(next() * Math.min(bytes.length, 65536));
        bytes[at] = Math.floor(next() * 256);
      }
      readsOrRefuses(bytes, `flips ${i}`);
    }
    // Every aligned 32-bit word of the headers set to a huge value, one at a time.
    for (let at = 0; at + 4 <= Math.min(original.length, 4096); at += 4) {
      const bytes = Buffer.from(original);
      bytes.writeUInt32LE(0xfffffff0, at);
      readsOrRefuses(bytes, `word at ${at}`);
    }
  },
);

test('not a PE file at all: refused with BAD_INPUT', () => {
  for (const bytes of [Buffer.alloc(0), Buffer.from('MZ'), Buffer.from('\x7fELF'), Buffer.alloc(4096, 0xff)])
    assert.throws(
      () => readReadyToRunNames(bytes),
      (e: unknown) => isProfcpuError(e, 'BAD_INPUT'),
    );
});

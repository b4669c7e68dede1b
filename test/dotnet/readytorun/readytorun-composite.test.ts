// Composite ReadyToRun images (`PublishReadyToRunComposite`: the app and the framework it keeps precompiled into one
// `ProfcpuFixture.r2r.dll`, the component assemblies beside it holding only metadata and IL): the reader names their
// code with each component's metadata, against the runtime itself (its jitdump logs every precompiled method it runs,
// named as the runtime names it), and collect names their frames from the image alone. Then the attacker's case.
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, truncate } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test, type TestContext } from 'node:test';
import { gunzipSync } from 'node:zlib';
import type { StepContext } from '../../../src/step/step.js';
import { OutputFolder } from '../../../src/files/output-folder.js';
import { readReadyToRunIndex } from '../../../src/dotnet/readytorun/readytorun-store.js';
import { readyToRunStep } from '../../../src/dotnet/readytorun/readytorun-step.js';
import type { TargetInfo } from '../../../src/target/inspect.js';
import { TargetFiles } from '../../../src/target/target-files.js';
import { FakeProc } from '../../support/fake-proc.js';
import { layout } from '../../../src/output/layout.js';
import { isProfcpuError } from '../../../src/error.js';
import { parseJitDump } from '../../../src/formats/jit/jitdump.js';
import { fileOffsetToRva } from '../../../src/dotnet/readytorun/pe-image.js';
import {
  assemblyMetadata,
  compositeComponentNames,
  NotReadyToRunError,
  readReadyToRunNames,
  type ReadyToRunNames,
} from '../../../src/dotnet/readytorun/readytorun.js';
import { parseProcMaps } from '../../../src/target/proc-maps.js';
import { readOutputs } from '../../naming/fixture-in-sidecar.js';
import { runCli } from '../../support/cli.js';
import { buildCompositeDotnetApp } from '../../support/composite-app.js';
import { startDotnetApp } from '../../support/dotnet-app.js';
import { lookup, random } from './readytorun-support.js';
import { canRecord, needDotnet } from '../../support/requirements.js';
import { tempDir } from '../../support/temp.js';

const compositeName = 'ProfcpuFixture.r2r.dll';

function haveSdk(t: TestContext): boolean {
  return needDotnet(t, 'and NuGet to publish the composite fixture');
}

/** The composite image's names, its components read from the files beside it (all, or those `keep` lets through). */
function readComposite(dir: string, keep: (name: string) => boolean = () => true): ReadyToRunNames {
  return readReadyToRunNames(readFileSync(join(dir, compositeName)), {
    fileName: compositeName,
    componentMetadata: (name) =>
      keep(name) && existsSync(join(dir, `${name}.dll`))
        ? assemblyMetadata(readFileSync(join(dir, `${name}.dll`)))
        : undefined,
  });
}

/** The composite app, started through startDotnetApp (which then finds it as its own child). */
async function startComposite(executable: string, env: Record<string, string> = {}) {
  return startDotnetApp({ env, wrap: (_fixture, args) => [executable, ...args] });
}

test(
  'a composite image: every precompiled method the runtime logs is named from it, same name, same start',
  { timeout: 300_000 },
  async (t) => {
    if (!haveSdk(t)) return;
    const executable = await buildCompositeDotnetApp();
    const app = await startComposite(executable, { DOTNET_PerfMapEnabled: '2', DOTNET_PerfMapStubGranularity: '2' });
    let maps: string;
    try {
      maps = readFileSync(`/proc/${app.pid}/maps`, 'utf8');
    } finally {
      await app.kill();
    }
    const dump = parseJitDump(readFileSync(`/tmp/jit-${app.nspid}.dump`));
    await rm(`/tmp/jit-${app.nspid}.dump`, { force: true });
    const names = readComposite(dirname(executable));
    assert.equal(names.unnamed, 0, 'every entry point is named');
    assert.equal(names.assembly, 'ProfcpuFixture.r2r');
    const mappings = parseProcMaps(maps).mappings;
    let compared = 0;
    const wrong: string[] = [];
    const assemblies = new Set<string>();
    for (const symbol of dump.symbols) {
      if (!symbol.name.endsWith('[PreJIT]')) continue;
      const m = mappings.find((x) => symbol.start >= x.start && symbol.start < x.end);
      assert.ok(m && m.path.endsWith(compositeName), `${symbol.name} lies in the composite image (${m?.path})`);
      const rva = fileOffsetToRva(names.sections, Number(symbol.start - m.start + m.offset));
      const found = rva === undefined ? undefined : lookup(names, rva);
      compared++;
      assemblies.add(/\[([^\]]+)\]/.exec(symbol.name)?.[1] ?? '');
      if (found?.name !== symbol.name || found.start !== rva)
        wrong.push(`${symbol.name}\n   image: ${found ? `${found.name} at +${rva! - found.start}` : 'nothing'}`);
    }
    assert.ok(compared > 300, `the runtime logged ${compared} precompiled methods (expected hundreds)`);
    assert.ok(assemblies.size >= 3, `methods of ${[...assemblies].join(', ')} compared`);
    assert.deepEqual(wrong, [], `${wrong.length} of ${compared} differ`);
  },
);

test('a composite image without some component files: the others are named; the components are refused', async (t) => {
  if (!haveSdk(t)) return;
  const dir = dirname(await buildCompositeDotnetApp());
  const all = readComposite(dir);
  const withoutCoreLib = readComposite(dir, (name) => name !== 'System.Private.CoreLib');
  // A method's own assembly is written `[Name] ` (a type's in a signature, `[Name]Type`).
  const inCoreLib = (n: ReadyToRunNames) =>
    n.methods.filter((m) => m.name.includes('[System.Private.CoreLib] ')).length;
  assert.ok(inCoreLib(all) > 1000, `${inCoreLib(all)} CoreLib blocks with every component`);
  assert.equal(inCoreLib(withoutCoreLib), 0, 'no CoreLib method named without its metadata');
  assert.ok(
    withoutCoreLib.methods.some((m) => m.name.includes('[System.Linq] ')),
    'the other components are named',
  );
  assert.ok(withoutCoreLib.unnamed > 0, 'the entries left unnamed are counted');
  // A component assembly holds no code of its own: refused, naming the composite image.
  assert.throws(
    () => readReadyToRunNames(readFileSync(join(dir, 'System.Linq.dll'))),
    (e: unknown) => e instanceof NotReadyToRunError && e.message.includes(compositeName),
  );
  assert.ok(compositeComponentNames(readFileSync(join(dir, compositeName))).includes('System.Private.CoreLib'));
  assert.deepEqual(compositeComponentNames(readFileSync(join(dir, 'System.Linq.dll'))).length, 0);
});

test(
  'collect names a composite image’s frames from the image alone (perf map off)',
  { timeout: 300_000 },
  async (t) => {
    if (!haveSdk(t) || !canRecord(t)) return;
    const executable = await buildCompositeDotnetApp();
    const app = await startComposite(executable);
    t.after(() => app.kill());
    const work = await tempDir(t, 'composite', '/var/tmp');
    const out = join(work, 'out');
    const run = await runCli([
      'collect',
      '--pid',
      String(app.pid),
      '--duration',
      '4',
      '--perfmap',
      'off',
      '--output',
      out,
    ]);
    assert.equal(run.exitCode, 0, String(run.all));
    const index = JSON.parse(await readFile(join(out, layout.readyToRunIndex), 'utf8')) as {
      images: { path: string; methods: number }[];
    };
    const composite = index.images.find((i) => i.path.endsWith(`/${compositeName}`));
    assert.ok(composite && composite.methods > 5000, `the composite image's table: ${JSON.stringify(index.images)}`);
    const { folded, naming } = await readOutputs(out);
    // The app's own methods are in the composite image too (the runtime logs Workloads::Run as [PreJIT]); with the
    // perf map off, the image is their only name.
    assert.ok(folded.includes('ProfcpuFixture.Workloads::Run_[j]'), `the app's code named:\n${folded.slice(0, 2000)}`);
    assert.ok((naming.dotnet?.resolved.readytorunFromImage ?? 0) > 0, 'named from the image');
    assert.ok(!/ProfcpuFixture\.r2r\.dll\]/.test(folded) || naming.framesByKind['readytorun']! > 0);
  },
);

test('hostile composite images and components: refused or read, never a crash', { timeout: 300_000 }, async (t) => {
  if (!haveSdk(t)) return;
  const dir = dirname(await buildCompositeDotnetApp());
  const original = readFileSync(join(dir, compositeName));
  const coreLib = assemblyMetadata(readFileSync(join(dir, 'System.Private.CoreLib.dll')));
  const next = random(20261124);
  const readsOrRefuses = (image: Buffer, componentMetadata: (name: string) => Buffer | undefined, what: string) => {
    try {
      readReadyToRunNames(image, { fileName: compositeName, componentMetadata });
    } catch (error) {
      assert.ok(isProfcpuError(error, 'BAD_INPUT'), `${what}: ${(error as Error).stack}`);
    }
  };
  const sane = (name: string) => (name === 'System.Private.CoreLib' ? coreLib : undefined);
  // The headers, the section lists and the component table are in the first 80 KiB here.
  for (let i = 0; i < 16; i++) {
    const bytes = Buffer.from(original);
    for (let j = 0; j < 8; j++) bytes[Math.floor(next() * 80 * 1024)] = Math.floor(next() * 256);
    readsOrRefuses(bytes, sane, `flips ${i}`);
  }
  for (let i = 0; i < 8; i++) {
    const cut = Math.floor(next() * original.length);
    readsOrRefuses(original.subarray(0, cut), sane, `cut at ${cut}`);
  }
  // A component's metadata that is damaged, cut short, another assembly's, or no metadata at all.
  const linq = assemblyMetadata(readFileSync(join(dir, 'System.Linq.dll')));
  const damaged = Buffer.from(coreLib);
  for (let j = 0; j < 64; j++) damaged[Math.floor(next() * Math.min(damaged.length, 65536))] = Math.floor(next() * 256);
  for (const [what, bytes] of [
    ['damaged', damaged],
    ['cut', coreLib.subarray(0, coreLib.length >> 1)],
    ['another assembly', linq],
    ['not metadata', Buffer.from('\x7fELF')],
  ] as const)
    readsOrRefuses(original, (name) => (name === 'System.Private.CoreLib' ? bytes : undefined), what);
  // Another assembly under a component's name names nothing of it.
  const swapped = readReadyToRunNames(original, {
    fileName: compositeName,
    componentMetadata: (name) => (name === 'System.Private.CoreLib' ? linq : undefined),
  });
  assert.equal(swapped.methods.length, 0, 'nothing named with the wrong metadata');
});

test('the step reads a composite image’s components within the target and its limits', async (t) => {
  if (!haveSdk(t)) return;
  const dir = dirname(await buildCompositeDotnetApp());
  const proc = await FakeProc.create();
  const maps = `7f0010000000-7f0012000000 r-xp 00000000 fe:00 1 /app/${compositeName}\n`;
  await proc.add({ pid: 78, nspid: 1, comm: 'app', cmdline: ['app'], maps });
  const root = join(proc.root, '78', 'root');
  await mkdir(join(root, 'app'), { recursive: true });
  for (const name of await readdir(dir))
    if (name.endsWith('.dll')) await copyFile(join(dir, name), join(root, 'app', name));
  // CoreLib's file is a link to this machine's copy (not followed out of the target's root); System.Linq's is larger
  // than an image may be (a sparse file: left unread).
  await rm(join(root, 'app', 'System.Private.CoreLib.dll'));
  await symlink(join(dir, 'System.Private.CoreLib.dll'), join(root, 'app', 'System.Private.CoreLib.dll'));
  await truncate(join(root, 'app', 'System.Linq.dll'), 300 << 20);
  const out = await mkdtemp(join(tmpdir(), 'profcpu-composite-step-'));
  const files = await TargetFiles.open(78, { procRoot: proc.root });
  t.after(async () => {
    await files.close();
    await proc.dispose();
    await rm(out, { recursive: true, force: true });
  });
  const context: StepContext = {
    target: { pid: 78 } as TargetInfo,
    dir: out,
    perfPath: 'perf',
    procRoot: proc.root,
    files,
    signal: new AbortController().signal,
    warn: () => {},
    progress: () => {},
  };
  const report = await readyToRunStep().beforeRecording!(context);
  assert.equal(report?.['images'], 1, JSON.stringify(report));
  const folder = await OutputFolder.open(out);
  let text: string;
  try {
    const [entry] = await readReadyToRunIndex(folder);
    assert.equal(entry?.path, `/app/${compositeName}`);
    text = gunzipSync(readFileSync(join(out, entry.file))).toString('utf8');
  } finally {
    await folder.close();
  }
  assert.match(text, /\[ProfcpuFixture\] ProfcpuFixture\.Workloads::Run\(/, 'the app’s component is named');
  assert.ok(!text.includes('[System.Private.CoreLib] '), 'no CoreLib name: its file is a link out of the target');
  assert.ok(!text.includes('[System.Linq] '), 'no System.Linq name: its file is larger than an image may be');
});

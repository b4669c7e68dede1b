import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runtimeStubsSkipReason } from '../../src/dotnet/runtime-stubs/runtime-stubs-step.js';
import type { NamingSources } from '../../src/dotnet/naming/folder-resolver.js';
import {
  formatNamingAdvice,
  namingAdvice,
  namingReport,
  type NamingFigures,
} from '../../src/postprocess/naming-advice.js';
import { createDotnetResolver } from '../../src/dotnet/naming/resolver.js';

const kinds = (over: Partial<NamingFigures['framesByKind']> = {}) => ({
  jit: 0,
  readytorun: 0,
  native: 0,
  'native-unnamed': 0,
  kernel: 0,
  unknown: 0,
  ...over,
});
const figures = (fullyNamed: number, exceptCoreclr: number, over: Partial<NamingFigures['framesByKind']>) => ({
  samples: 100,
  fullyNamed,
  fullyNamedExceptCoreclr: exceptCoreclr,
  framesByKind: kinds(over),
});
const complete: NamingSources = {
  pids: [1],
  runtime: 'dotnet',
  perfMap: { file: 'target/perf-1.map', symbols: 700, skipped: 0, truncated: false },
  jitDump: { file: 'target/jit-1.dump', symbols: 1400, readyToRun: 700, skipped: 0, truncated: false },
};

test('no advice at or above 95%, nor without samples', () => {
  assert.equal(namingAdvice(figures(95, 95, { 'native-unnamed': 5 }), { sources: complete }), undefined);
  assert.equal(namingAdvice({ ...figures(0, 0, {}), samples: 0 }), undefined);
});

test('no perf map at all: says so and how to get one', () => {
  const advice = namingAdvice(figures(3, 3, { unknown: 900, 'native-unnamed': 200 }), {});
  assert.ok(advice);
  assert.equal(advice.share, 0.03);
  assert.match(advice.causes[0]!.cause, /wrote no perf map nor jitdump/);
  assert.match(advice.causes[0]!.remedy, /DOTNET_PerfMapEnabled=1/);
  // The unknown and unnamed frames follow from it: not blamed on anything else.
  assert.equal(advice.causes.length, 1);
});

test('a jitdump abandoned by the runtime (variable set in the app) points to enabling over IPC', () => {
  const sources = { ...complete, jitDump: { ...complete.jitDump!, symbols: 2, readyToRun: 0, truncated: true } };
  const advice = namingAdvice(figures(40, 41, { 'native-unnamed': 300 }), { sources, perfMapEnabledBy: 'environment' });
  assert.match(advice!.causes[0]!.cause, /jitdump stops early/);
  assert.match(advice!.causes[0]!.remedy, /DOTNET_PerfMapStubGranularity=2.*re-opens an abandoned jitdump/);
  const mapOnly = namingAdvice(figures(40, 41, { 'native-unnamed': 300 }), {
    sources: { ...complete, jitDump: undefined },
  });
  assert.match(mapOnly!.causes[0]!.cause, /jitdump, which is missing/);
});

test('libcoreclr.so alone below target: the debug-file remedy, and no blame on other libraries', () => {
  const advice = namingAdvice(figures(2, 98, { 'native-unnamed': 3000 }), { sources: complete });
  assert.equal(advice!.causes.length, 1);
  assert.match(advice!.causes[0]!.cause, /libcoreclr\.so.*alone keeps the share below target/);
  assert.match(advice!.causes[0]!.remedy, /profcpu symbols --pid <pid> --libraries coreclr/);
});

test('unlogged stubs, broken chains and other native libraries each get their cause; lines for a summary', () => {
  const advice = namingAdvice(figures(50, 60, { 'native-unnamed': 300, unknown: 40 }), {
    sources: complete,
    resolver: {
      jit: 10,
      readytorun: 5,
      readytorunFromImage: 0,
      unloggedStubs: 6,
      stubsFromMemory: 0,
      noSymbol: 3,
      noMapping: 2,
      notManaged: 20,
      unnamedByFile: { 'libclrjit.so': 2, 'libcoreclr.so': 30, 'System.Private.CoreLib.dll': 4, '[unknown]': 3 },
    },
  });
  assert.deepEqual(
    advice!.causes.map(
      (c) =>
        /^(\d+ distinct frame addresses lie in \.NET runtime stubs|frames outside any named code|frames inside libcoreclr)/.exec(
          c.cause,
        )?.[1],
    ),
    [
      '6 distinct frame addresses lie in .NET runtime stubs',
      'frames outside any named code',
      'frames inside libcoreclr',
      undefined,
    ],
  );
  assert.match(advice!.causes[0]!.cause, /\[\.NET stub, not in perf map\]/);
  assert.match(advice!.causes[0]!.remedy, /^Run collect with ptrace access to the target/);
  assert.match(advice!.causes[0]!.remedy, /Only if that cannot be: start the app with DOTNET_PerfMapEnabled=1/);
  assert.match(advice!.causes[0]!.remedy, /not DOTNET_PerfMapStubGranularity=4/);
  assert.match(advice!.causes[1]!.cause, /\(2 distinct addresses\).*frame-pointer chains/);
  // The resolver saw which native files were left unnamed: they are named, managed and unknown ones are not.
  assert.match(advice!.causes[3]!.cause, /^libclrjit\.so has frames no symbol names/);
  // A profcpu command fetches their debug files: nothing to install in the target (nor in the sidecar).
  assert.match(advice!.causes[3]!.remedy, /^Run `profcpu symbols --pid <pid>` while the app runs, with a server/);
  assert.match(advice!.causes[3]!.remedy, /--symbols sampled, the default/);
  assert.doesNotMatch(advice!.causes[3]!.remedy, /install/i);
  const lines = formatNamingAdvice(advice!);
  assert.equal(lines[0], 'only 50.0% of samples have every frame named (target 95.0%):');
  assert.equal(lines.length, 5);
  assert.ok(lines.slice(1).every((l) => l.startsWith('- ')));
});

test('stubs left unnamed although the table was read from memory: nothing to set in the app', () => {
  const advice = namingAdvice(figures(50, 60, { unknown: 3 }), {
    sources: {
      ...complete,
      runtimeStubs: { file: 'target/runtime-stubs.json', ranges: 129, runtimeVersion: '10.0.12' },
    },
    resolver: {
      jit: 10,
      readytorun: 5,
      readytorunFromImage: 0,
      unloggedStubs: 2,
      stubsFromMemory: 8,
      noSymbol: 0,
      noMapping: 0,
      notManaged: 0,
      unnamedByFile: {},
    },
  });
  const stubs = advice!.causes.find((c) => /runtime stubs/.test(c.cause));
  assert.match(stubs!.cause, /outside the 129 stub ranges collect read from the runtime’s memory/);
  assert.match(stubs!.remedy, /^Nothing to set in the app/);
  assert.doesNotMatch(stubs!.remedy, /DOTNET_/);
});

test('no table read: the remedy follows the runtime-stubs step’s reason', () => {
  const resolver = {
    jit: 10,
    readytorun: 5,
    readytorunFromImage: 0,
    unloggedStubs: 4,
    stubsFromMemory: 0,
    noSymbol: 0,
    noMapping: 0,
    notManaged: 0,
    unnamedByFile: {},
  };
  const stubsCause = (runtimeStubsSkipped: string) =>
    namingAdvice(figures(50, 60, {}), { sources: complete, resolver, runtimeStubsSkipped })!.causes.find((c) =>
      /runtime stubs/.test(c.cause),
    )!;
  // Ptrace refused: get it.
  const refused = stubsCause('cannot read the memory of process 7 (EPERM)');
  assert.match(refused.cause, /\(cannot read the memory of process 7 \(EPERM\)\)$/);
  assert.match(refused.remedy, /^Run collect with ptrace access/);
  // Another reason: ptrace access would not help, so it is not offered.
  const unknown = stubsCause(
    'the version of /app/libcoreclr.so is unknown, and before .NET 10 its layout depends on it',
  );
  assert.match(unknown.cause, /the version of \/app\/libcoreclr\.so is unknown/);
  assert.doesNotMatch(unknown.remedy, /ptrace/);
  assert.match(unknown.remedy, /^To name them, start the app with DOTNET_PerfMapEnabled=1/);
  // The reason postprocess passes: the step's last pass's, when it read no table.
  const passes = [
    { pass: 'before', skipped: 'a' },
    { pass: 'after', skipped: 'b' },
  ];
  assert.equal(runtimeStubsSkipReason({ passes }), 'b');
  assert.equal(runtimeStubsSkipReason({ ranges: 3, passes }), undefined);
  assert.equal(runtimeStubsSkipReason(undefined), undefined);
});

test('no stub cause when every frame in runtime memory was named', () => {
  const resolver = {
    jit: 9,
    readytorun: 1,
    readytorunFromImage: 0,
    unloggedStubs: 0,
    stubsFromMemory: 0,
    noSymbol: 0,
    noMapping: 1,
    notManaged: 0,
  };
  const advice = namingAdvice(figures(50, 60, { unknown: 1, 'native-unnamed': 80 }), {
    sources: complete,
    resolver: { ...resolver, unnamedByFile: { '[unknown]': 1 } },
  });
  assert.ok(advice!.causes.every((c) => !/stubs/.test(c.cause)));
});

test('a target that is not .NET is not told about perf maps', () => {
  const advice = namingAdvice(figures(10, 10, { 'native-unnamed': 300 }), { dotnet: false });
  assert.deepEqual(
    advice!.causes.map((c) => c.cause.slice(0, 20)),
    ['native libraries oth'],
  );
});

test('namingReport: the figures, what the resolver read and did, and the advice, for manifest.json', () => {
  const quality = figures(90, 99, { jit: 500, readytorun: 100, 'native-unnamed': 50 });
  const resolver = Object.assign(createDotnetResolver({ symbols: [], mappings: [] }), { sources: complete });
  resolver.resolve({ pid: 1, ip: 0x10n, dso: '[unknown]' });
  const report = namingReport(quality, resolver);
  assert.equal(report.fullyNamed, 90);
  assert.deepEqual(report.dotnet?.sources, complete);
  assert.equal(report.dotnet?.resolved.noMapping, 1);
  assert.match(report.advice!.causes[0]!.cause, /libcoreclr/);
  // JSON-ready: no bigint, no class instances.
  assert.deepEqual(JSON.parse(JSON.stringify(report)), report);
  // No resolver: not taken for .NET, no perf-map advice; good naming: no advice at all.
  assert.doesNotMatch(JSON.stringify(namingReport(figures(10, 10, { unknown: 5 }), undefined)), /\.NET|DOTNET_/);
  assert.equal(namingReport(figures(99, 99, {}), undefined).advice, undefined);
});

test('unnamed memfd:doublemapper frames in a recording without snapshots: W^X JIT code, and how to name it', () => {
  const advice = namingAdvice(figures(9, 9, { unknown: 2000, 'native-unnamed': 100 }), {
    dotnet: false,
    memfdFrames: true,
  });
  const cause = advice!.causes.find((c) => /no file nor perf map/.test(c.cause));
  assert.match(cause!.cause, /memfd:doublemapper mapping \(its W\^X default\)/);
  assert.match(cause!.remedy, /profcpu collect.*DOTNET_EnableWriteXorExecute=0/);
  // Without memfd frames, the general remedy for JIT code without a perf map.
  const plain = namingAdvice(figures(9, 9, { unknown: 2000 }), { dotnet: false });
  assert.match(plain!.causes[0]!.remedy, /\/tmp\/perf-<pid>\.map/);
});

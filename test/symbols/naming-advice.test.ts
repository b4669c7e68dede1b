import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { NamingSources } from '../../src/symbols/bundle-resolver.js';
import { formatNamingAdvice, namingAdvice, type NamingFigures } from '../../src/symbols/naming-advice.js';

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
});

test('a jitdump abandoned by the runtime (variable set in the app) points to enabling over IPC', () => {
  const sources = { ...complete, jitDump: { ...complete.jitDump!, symbols: 2, readyToRun: 0, truncated: true } };
  const advice = namingAdvice(figures(40, 41, { 'native-unnamed': 300 }), { sources, perfMapEnabledBy: 'environment' });
  assert.match(advice!.causes[0]!.cause, /jitdump stops early/);
  assert.match(advice!.causes[0]!.remedy, /without DOTNET_PerfMapEnabled/);
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

test('unknown frames and other native libraries each get their cause; lines format for a summary', () => {
  const advice = namingAdvice(figures(50, 60, { 'native-unnamed': 300, unknown: 40 }), {
    sources: complete,
    resolver: { jit: 10, readytorun: 5, noSymbol: 3, noMapping: 0, notManaged: 20 },
  });
  assert.deepEqual(
    advice!.causes.map(
      (c) => /^(\d+ frames lie in code|frames inside libcoreclr|native libraries other)/.exec(c.cause)?.[1],
    ),
    ['40 frames lie in code', 'frames inside libcoreclr', 'native libraries other'],
  );
  const lines = formatNamingAdvice(advice!);
  assert.equal(lines[0], 'only 50.0% of samples have every frame named (target 95.0%):');
  assert.equal(lines.length, 4);
  assert.ok(lines.slice(1).every((l) => l.startsWith('- ')));
});

test('a target that is not .NET is not told about perf maps', () => {
  const advice = namingAdvice(figures(10, 10, { 'native-unnamed': 300 }), { dotnet: false });
  assert.deepEqual(
    advice!.causes.map((c) => c.cause.slice(0, 20)),
    ['native libraries oth'],
  );
});

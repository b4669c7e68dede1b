// `npm run bench maps`: loading and looking up a big service's perf map and jitdump. Writes an output folder's
// target/ snapshots (see src/output/layout.ts) with PROFCPU_BENCH_MAPS_ENTRIES perf-map entries and as many jitdump
// records (default 1 000 000 each) and .NET-length names (~150 bytes): the jitdump repeats every other perf-map entry,
// in order, as the runtime does, and adds as many ReadyToRun methods in 20 .dll mappings; one perf-map entry in 97
// is logged again over an older one (later wins). PROFCPU_BENCH_MAPS_CODE_BYTES adds that many code bytes to each
// jitdump record (default 0: the runtime writes the method's code there, which only makes the file bigger).
// A child process (this script with `load DIR N`) then times loadFolderResolver (read, parse, de-duplication, CodeMap
// build), checks a few names, times resolve() over 1 000 000 frames (3 in 4 absolute JIT addresses, 1 in 4 offsets in
// a .dll), and reads its peak RSS (VmHWM) after the load and at the end, so the figures are the load's alone.
// PROFCPU_BENCH_MAPS_DIR=<folder> keeps the inputs there (made on the first run, reused after). Never asserted: read
// the figures.
import { spawnSync } from 'node:child_process';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { loadFolderResolver } from '../../src/dotnet/naming/folder-resolver.js';

const nspid = 1;
/** Each perf-map entry i owns a 1 KiB slot of the anonymous code heap, so its address is a function of i. */
const codeHeap = 0x7f20_0000_0000;
const slot = 0x400;
/** ReadyToRun methods: 20 assemblies, each mapped r-xp at dllBase + d * dllStride. */
const dlls = 20;
const dllBase = 0x7f80_0000_0000;
const dllStride = 0x1_0000_0000;
const r2rSlot = 0x200;
const dllPath = (d: number) =>
  `/usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/${['System.Private.CoreLib', 'System.Linq', 'System.Net.Http', 'System.Text.Json', 'System.Collections'][d % 5]}${d < 5 ? '' : `.Part${d}`}.dll`;

/** A 32-bit hash of (i, salt): every choice below is a pure function of the entry's number. */
function hash(i: number, salt: number): number {
  let h = Math.imul(i ^ Math.imul(salt, 0x9e3779b1), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
const pick = <T>(list: readonly T[], i: number, salt: number): T => list[hash(i, salt) % list.length]!;

const returns = [
  'void',
  'instance void',
  'bool',
  'instance bool',
  'int32',
  'instance class System.Threading.Tasks.Task`1<!0>',
  'valuetype System.Threading.Tasks.ValueTask`1<int32>',
  'instance string',
  'class System.Collections.Generic.IEnumerable`1<!!0>',
  'instance valuetype System.ReadOnlySpan`1<uint8>',
];
const modules = [
  'System.Private.CoreLib',
  'System.Linq',
  'Microsoft.AspNetCore.Server.Kestrel.Core',
  'Orders.Api',
  'Npgsql',
  'System.Text.Json',
  'Microsoft.Extensions.DependencyInjection',
  'Orders.Domain',
];
const types = [
  'System.Collections.Generic.Dictionary`2[System.__Canon,System.__Canon]',
  'System.Runtime.CompilerServices.AsyncTaskMethodBuilder`1+AsyncStateMachineBox`1[System.Int32,Orders.Api.Controllers.OrdersController+<GetAsync>d__7]',
  'Microsoft.AspNetCore.Server.Kestrel.Core.Internal.Http.HttpProtocol',
  'Npgsql.Internal.NpgsqlConnector',
  'System.Text.Json.Serialization.Converters.ObjectDefaultConverter`1[System.__Canon]',
  'Orders.Domain.Pricing.PriceCalculator+<>c__DisplayClass12_0',
  'System.Linq.Enumerable+SelectListIterator`2[System.__Canon,System.Int32]',
];
const methods = [
  'TryInsert(!0,!1,valuetype System.Collections.Generic.InsertionBehavior)',
  'MoveNext()',
  'ProcessRequestsAsync<!!0>(class Microsoft.AspNetCore.Hosting.Server.IHttpApplication`1<!!0>)',
  'Read(valuetype System.Text.Json.Utf8JsonReader&,class System.Type,class System.Text.Json.JsonSerializerOptions)',
  'get_Item(!0)',
  '.ctor(class System.IServiceProvider)',
  'ExecuteReaderAsync(valuetype System.Data.CommandBehavior,bool,valuetype System.Threading.CancellationToken)',
];
const tiers = ['[OptimizedTier1]', '[QuickJitted]', '[OptimizedTier1]', '[Optimized]', '[OptimizedTier1OSR]'];
const stubKinds = ['VSD_DispatchStub', 'VSD_ResolveStub', 'FixupPrecodeStub', 'DelegateShuffleThunk'];

/** The perf map's i-th name (and the jitdump's copy of it). */
function jitName(i: number): string {
  if (i % 50 === 7) return `stub<${hash(i, 1) % 40}> ReportStubBlock<${pick(stubKinds, i, 2)}>`;
  return (
    `${pick(returns, i, 3)} [${pick(modules, i, 4)}] ${pick(types, i, 5)}${hash(i, 6) % 7 === 0 ? `+Nested${i}` : ''}` +
    `::${pick(methods, i, 7).replace('(', `_${hash(i, 8) % 100000}(`)}${pick(tiers, i, 9)}`
  );
}

/** The perf map's i-th range: its slot, or for one in 97 a new range over the one logged 40 entries before. */
function jitRange(i: number): { start: number; size: number } {
  const size = 0x20 + (hash(i, 10) % (slot - 0x20));
  if (i % 97 === 96) return { start: codeHeap + (i - 40) * slot + 0x10, size };
  return { start: codeHeap + i * slot, size };
}

/** The k-th ReadyToRun method: assembly k % 20, its k / 20-th slot. */
function r2rRange(k: number): { start: number; size: number; dll: number } {
  const dll = k % dlls;
  return { start: dllBase + dll * dllStride + Math.floor(k / dlls) * r2rSlot, size: 0x10 + (hash(k, 11) % 0x1f0), dll };
}
const r2rName = (k: number) =>
  `${pick(returns, k, 12)} [System.Private.CoreLib] ${pick(types, k, 13)}::${pick(methods, k, 14).replace('(', `_${k}(`)}[PreJIT]`;

const hex = (n: number) => n.toString(16);

function writePerfMap(path: string, n: number): void {
  const fd = openSync(path, 'w');
  let chunk = '';
  for (let i = 0; i < n; i++) {
    const { start, size } = jitRange(i);
    chunk += `0x${hex(start)} ${hex(size)} ${jitName(i)}\n`;
    if (chunk.length > 1 << 20) {
      writeSync(fd, chunk);
      chunk = '';
    }
  }
  writeSync(fd, chunk);
  fsyncSync(fd); // so that writing the pages back does not slow the load timed below
  closeSync(fd);
}

function writeJitDump(path: string, n: number, codeBytes: number): void {
  const fd = openSync(path, 'w');
  const buffer = Buffer.alloc(8 << 20);
  buffer.writeUInt32LE(0x4a695444, 0);
  buffer.writeUInt32LE(1, 4);
  buffer.writeUInt32LE(40, 8);
  buffer.writeUInt32LE(62, 12);
  buffer.writeUInt32LE(nspid, 20);
  let used = 40;
  for (let k = 0; k < n; k++) {
    // Even records repeat the perf map's entries in order; odd ones are ReadyToRun methods.
    const { start, size } = k % 2 === 0 ? jitRange(k / 2) : r2rRange((k - 1) / 2);
    const name = k % 2 === 0 ? jitName(k / 2) : r2rName((k - 1) / 2);
    const total = 56 + Buffer.byteLength(name) + 1 + codeBytes;
    if (used + total > buffer.length) {
      writeSync(fd, buffer, 0, used);
      used = 0;
    }
    buffer.fill(0, used, used + total);
    buffer.writeUInt32LE(0, used);
    buffer.writeUInt32LE(total, used + 4);
    buffer.writeBigUInt64LE(BigInt(k), used + 8);
    buffer.writeUInt32LE(nspid, used + 16);
    buffer.writeBigUInt64LE(BigInt(start), used + 24);
    buffer.writeBigUInt64LE(BigInt(start), used + 32);
    buffer.writeBigUInt64LE(BigInt(size), used + 40);
    buffer.writeBigUInt64LE(BigInt(k + 1), used + 48);
    buffer.write(name, used + 56);
    used += total;
  }
  writeSync(fd, buffer, 0, used);
  fsyncSync(fd); // so that writing the pages back does not slow the load timed below
  closeSync(fd);
}

function writeMaps(path: string, n: number): void {
  const lines = [`${hex(codeHeap)}-${hex(codeHeap + (n + 1) * slot)} rwxp 00000000 00:00 0 `];
  const perDll = Math.ceil(n / 2 / dlls) * r2rSlot + 0x1000;
  for (let d = 0; d < dlls; d++) {
    const start = dllBase + d * dllStride;
    lines.push(`${hex(start)}-${hex(start + perDll)} r-xp 00000000 fe:00 ${1000 + d} ${dllPath(d)}`);
  }
  writeFileSync(path, lines.join('\n') + '\n');
}

function vm(field: 'VmHWM' | 'VmRSS'): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return Number(match?.[1] ?? NaN) / 1024;
}

/** Child: load, check, look up; prints one JSON line of figures. */
async function load(dir: string, n: number): Promise<void> {
  const baseline = vm('VmRSS');
  const warnings: string[] = [];
  const t0 = performance.now();
  const resolver = await loadFolderResolver(dir, (m) => warnings.push(m));
  const t1 = performance.now();
  const loadPeak = vm('VmHWM');
  if (!resolver) throw new Error('no resolver');
  // Twice, a tick apart: buffers are freed after the collection that finds them unreachable.
  (globalThis as { gc?: () => void }).gc?.();
  await new Promise((resolve) => setTimeout(resolve, 50));
  (globalThis as { gc?: () => void }).gc?.();
  const retained = vm('VmRSS');
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  const liveMB = (heapUsed + arrayBuffers) / 2 ** 20;

  const jit = (i: number, offset = 0) => ({ pid: nspid, ip: BigInt(jitRange(i).start + offset), dso: '[unknown]' });
  const r2r = (k: number) => {
    const { start, dll } = r2rRange(k);
    return { pid: nspid, ip: BigInt(start - (dllBase + dll * dllStride) + 4), dso: dllPath(dll) };
  };
  const last = n - 1 - ((n - 1) % 97 === 96 ? 1 : 0);
  const middle = Math.floor(n / 2 / 97) * 97 + 3;
  const checks: [string, { pid: number; ip: bigint; dso: string }, string][] = [
    ['first', jit(0), jitName(0)],
    ['last', jit(last, 1), jitName(last)],
    ['middle', jit(middle, 2), jitName(middle)],
    ['overlap, newer', jit(96), jitName(96)],
    ['overlap, older', jit(56), jitName(56)],
    ['ReadyToRun', r2r(Math.floor(n / 4)), r2rName(Math.floor(n / 4))],
  ];
  const failed = checks.filter(([, frame, name]) => resolver.resolve(frame)?.name !== name).map(([what]) => what);

  const lookups = 1_000_000;
  let named = 0;
  const t2 = performance.now();
  for (let j = 0; j < lookups; j++) {
    const i = hash(j, 99) % n;
    const frame = j % 4 === 3 ? r2r(i >>> 1) : jit(i, hash(j, 98) % 0x20);
    if (resolver.resolve(frame)) named++;
  }
  const t3 = performance.now();
  console.log(
    JSON.stringify({
      loadSeconds: (t1 - t0) / 1000,
      baselineMB: baseline,
      loadPeakMB: loadPeak,
      retainedMB: retained,
      liveMB,
      finalPeakMB: vm('VmHWM'),
      lookupsPerSecond: lookups / ((t3 - t2) / 1000),
      named: named / lookups,
      failed,
      sources: resolver.sources,
      warnings,
    }),
  );
}

function bench(): void {
  const n = Number(process.env['PROFCPU_BENCH_MAPS_ENTRIES'] ?? 1_000_000);
  const codeBytes = Number(process.env['PROFCPU_BENCH_MAPS_CODE_BYTES'] ?? 0);
  const kept = process.env['PROFCPU_BENCH_MAPS_DIR'];
  const dir = kept ?? mkdtempSync(join(tmpdir(), 'profcpu-bench-maps-'));
  try {
    const t0 = performance.now();
    if (!kept || !existsSync(join(dir, 'target/target.json'))) {
      mkdirSync(join(dir, 'target'), { recursive: true });
      writePerfMap(join(dir, `target/perf-${nspid}.map`), n);
      writeJitDump(join(dir, `target/jit-${nspid}.dump`), n, codeBytes);
      writeMaps(join(dir, 'target/maps'), n);
      writeFileSync(join(dir, 'target/target.json'), JSON.stringify({ pid: 4321, nspid, runtime: 'dotnet' }));
    }
    const mb = (file: string) => (statSync(join(dir, 'target', file)).size / 1e6).toFixed(0);
    console.log(
      `inputs        perf map ${n} entries, ${mb(`perf-${nspid}.map`)} MB; jitdump ${n} records, ` +
        `${mb(`jit-${nspid}.dump`)} MB (${codeBytes} code bytes each); written in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
    );
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', '--expose-gc', fileURLToPath(import.meta.url), 'load', dir, String(n)],
      { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const line = child.stdout.trim().split('\n').pop() ?? '';
    if (child.status !== 0 || !line.startsWith('{')) {
      console.log(`load          FAILED: exit ${child.status} ${child.signal ?? ''}`);
      console.log(child.stderr.trim().split('\n').slice(-8).join('\n'));
      process.exitCode = 1;
      return;
    }
    const f = JSON.parse(line) as {
      loadSeconds: number;
      baselineMB: number;
      loadPeakMB: number;
      retainedMB: number;
      liveMB: number;
      finalPeakMB: number;
      lookupsPerSecond: number;
      named: number;
      failed: string[];
      sources: unknown;
      warnings: string[];
    };
    console.log(`load          ${f.loadSeconds.toFixed(2)} s (read, parse, de-duplicate, build the code map)`);
    console.log(
      `peak RSS      ${f.loadPeakMB.toFixed(0)} MB after the load (${f.baselineMB.toFixed(0)} MB before it), ` +
        `${f.retainedMB.toFixed(0)} MB resident after a GC (${f.liveMB.toFixed(0)} MB of JS heap and buffers in use), ` +
        `${f.finalPeakMB.toFixed(0)} MB at the end`,
    );
    console.log(
      `lookups       ${(f.lookupsPerSecond / 1e6).toFixed(2)} M resolve()/s, ${(100 * f.named).toFixed(1)}% named`,
    );
    console.log(
      `checks        ${f.failed.length === 0 ? 'first, last, middle, overlaps, ReadyToRun all right' : `WRONG: ${f.failed.join(', ')}`}`,
    );
    console.log(`sources       ${JSON.stringify(f.sources)}`);
    if (f.warnings.length) console.log(`warnings      ${f.warnings.join(' | ')}`);
    console.log(`load average  ${loadavg()[0]!.toFixed(1)} (the machine's other work slows the figures)`);
    if (f.failed.length) process.exitCode = 1;
  } finally {
    if (!kept) rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'load') await load(process.argv[3]!, Number(process.argv[4]));
else bench();

// `npm run bench tables`: the time the native engine spends building each kind of symbol table, as a postprocess
// does it once, with its code cold: each figure comes from a fresh process. Tables: this Node's executable (its
// .symtab: some 150 000 symbols, C++ ones with many aliases), libc, this machine's /proc/kallsyms (read, then
// parsed), and a synthetic perf map of PROFCPU_BENCH_MAP_LINES lines (default 1 000 000, a big .NET service's).
// PROFCPU_BENCH_RUNS (default 5) processes per table; prints wall and CPU milliseconds, min / median / max.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { perfMapFunctions } from '../../src/jit/jit-maps.js';
import { kallsymsTable } from '../../src/formats/kallsyms.js';
import { fileByteSource } from '../../src/formats/elf/elf.js';
import { readFunctionTable } from '../../src/formats/elf/elf-functions.js';

const libc = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const mapLines = Number(process.env['PROFCPU_BENCH_MAP_LINES'] ?? 1_000_000);
const mapPath = join(tmpdir(), `profcpu-bench-perf-${mapLines}.map`);

async function elfTable(path: string): Promise<number> {
  const file = await open(path);
  try {
    return (await readFunctionTable(fileByteSource(file, (await file.stat()).size, (e) => e as Error))).size;
  } finally {
    await file.close();
  }
}

/** Builds one table in this process; prints its size and the wall and CPU milliseconds it took. */
async function one(kind: string): Promise<void> {
  const input =
    kind === 'kallsyms parse'
      ? readFileSync('/proc/kallsyms')
      : kind === 'perf map'
        ? readFileSync(mapPath)
        : undefined;
  const wall = performance.now();
  const cpu = process.cpuUsage();
  let size: number;
  if (kind === 'node') size = await elfTable(process.execPath);
  else if (kind === 'libc') size = await elfTable(libc);
  else if (kind === 'kallsyms read') size = readFileSync('/proc/kallsyms').length;
  else if (kind === 'kallsyms parse') size = kallsymsTable(input!).size;
  else size = perfMapFunctions(input!).size;
  const used = process.cpuUsage(cpu);
  console.log(JSON.stringify({ size, wall: performance.now() - wall, cpu: (used.user + used.system) / 1000 }));
}

function writeMap(): void {
  if (existsSync(mapPath)) return;
  const lines: string[] = [];
  let at = 0x7f1234000000;
  for (let i = 0; i < mapLines; i++) {
    const size = 16 + ((i * 7919) % 4000);
    lines.push(
      `${at.toString(16)} ${size.toString(16)} [OptimizedTier1] App.Namespace${i % 97}.Type${i}::Method(int32)`,
    );
    at += size + (i % 5 === 0 ? 64 : 0);
  }
  writeFileSync(mapPath, `${lines.join('\n')}\n`);
}

const spread = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return `${sorted[0]!.toFixed(0)} / ${sorted[sorted.length >> 1]!.toFixed(0)} / ${sorted[sorted.length - 1]!.toFixed(0)}`;
};

if (process.argv[2] === 'one') await one(process.argv[3]!);
else {
  writeMap();
  const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 5);
  console.log(`load average ${loadavg()[0]!.toFixed(1)}; ${runs} fresh processes per table; ms min / median / max`);
  for (const kind of ['node', 'libc', 'kallsyms read', 'kallsyms parse', 'perf map']) {
    if (kind === 'libc' && !existsSync(libc)) continue;
    const figures = Array.from({ length: runs }, () => {
      const out = execFileSync(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), 'one', kind]);
      return JSON.parse(out.toString()) as { size: number; wall: number; cpu: number };
    });
    const size = figures[0]!.size;
    const what = kind === 'kallsyms read' ? `${size} bytes` : `${size} entries`;
    console.log(
      `${kind.padEnd(15)} ${what.padEnd(16)} wall ${spread(figures.map((f) => f.wall))}  cpu ${spread(figures.map((f) => f.cpu))}`,
    );
  }
}

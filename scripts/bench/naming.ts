// `npm run bench naming`: how many samples have every frame named, for one recording of the .NET fixture app, by
// (a) plain `perf script` with the target's perf map in /tmp (what the original shell tool relied on) and (b) profcpu's
// pipeline (the same perf-script text, plus the .NET resolver over the perf map, jitdump and maps snapshots).
//
// By default it builds and starts the fixture app (nothing set in its environment), records it with the built CLI
// (`npm run build` first), and prints the command so anyone can reproduce the recording. PROFCPU_BENCH_DIR=<folder>
// measures an existing output folder instead (one with flamescope/perf_script.out, i.e. post-processed);
// PROFCPU_BENCH_SECONDS sets the recording's length (default 10).
import { execFileSync } from 'node:child_process';
import { createReadStream, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layout } from '../../src/bundle/layout.js';
import { foldStream, type FoldResult } from '../../src/stacks/fold.js';
import { frameKinds } from '../../src/stacks/frame-kind.js';
import { loadBundleResolver } from '../../src/symbols/bundle-resolver.js';
import { formatNamingAdvice, namingAdvice } from '../../src/symbols/naming-advice.js';
import { cliPath, repoRoot } from '../../test/support/cli.js';
import { startDotnetApp } from '../../test/support/dotnet-app.js';

const percent = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');

async function record(): Promise<string> {
  if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build\` first`);
  const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 10);
  const app = await startDotnetApp();
  try {
    const dir = join(mkdtempSync(join(tmpdir(), 'profcpu-bench-naming-')), 'out');
    const args = ['collect', '--pid', String(app.pid), '--duration', String(seconds), '--output', dir, '--quiet'];
    console.log(`fixture     ${app.executable} (pid ${app.pid}, nothing set in its environment)`);
    console.log(`recording   node ${cliPath} ${args.join(' ')}`);
    execFileSync(process.execPath, [cliPath, ...args], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'inherit'] });
    return dir;
  } finally {
    await app.kill();
  }
}

function report(label: string, fold: FoldResult): void {
  const q = fold.quality;
  const kinds = frameKinds.map((k) => `${k} ${q.framesByKind[k]}`).join(', ');
  console.log(
    `${label} ${percent(q.fullyNamed, q.samples)} of ${q.samples} samples fully named, ` +
      `${percent(q.fullyNamedExceptCoreclr, q.samples)} forgiving libcoreclr.so`,
  );
  console.log(`${' '.repeat(label.length)} frames: ${kinds}`);
}

const dir = process.env['PROFCPU_BENCH_DIR'] ?? (await record());
const script = join(dir, layout.perfScript);
if (!existsSync(script)) throw new Error(`${script} is missing: post-process the folder first`);
console.log(`folder      ${dir}`);

const plain = await foldStream(createReadStream(script));
report('perf + map ', plain);

const warnings: string[] = [];
const loaded = await loadBundleResolver(dir, (m) => warnings.push(m));
const started = performance.now();
const named = await foldStream(createReadStream(script), {}, undefined, loaded);
const ms = performance.now() - started;
report('profcpu    ', named);
if (loaded) {
  const { perfMap, jitDump, procMaps } = loaded.sources;
  console.log(
    `sources     perf map ${perfMap?.symbols ?? 'none'}, jitdump ${jitDump?.symbols ?? 'none'} ` +
      `(${jitDump?.readyToRun ?? 0} ReadyToRun), maps ${procMaps?.mappings ?? 'none'}; ` +
      `resolver ${JSON.stringify(loaded.stats)} (distinct frame lines), fold ${ms.toFixed(0)} ms`,
  );
}
for (const w of warnings) console.log(`warning     ${w}`);
const advice = namingAdvice(named.quality, { sources: loaded?.sources, resolver: loaded?.stats });
for (const line of advice ? formatNamingAdvice(advice) : []) console.log(`advice      ${line}`);

// `npm run bench naming`: how many samples have every frame named, for one recording of the .NET fixture app, by
// (a) plain `perf script` with the target's perf map in /tmp (what the original shell tool relied on) and (b) profcpu's
// pipeline (the same perf-script text, plus the .NET resolver over the perf map, jitdump and maps snapshots).
//
// By default it builds the fixture app and starts it with nothing set in its environment, as PID 1 of its own PID and
// mount namespaces, records it with the built CLI (`npm run build` first) from a sidecar joined to that PID namespace
// (needs root), and prints the command so anyone can reproduce the recording. PROFCPU_BENCH_DIR=<folder>
// measures an existing output folder instead (one with flamescope/perf_script.out, i.e. post-processed);
// PROFCPU_BENCH_SECONDS sets the recording's length (default 10); PROFCPU_BENCH_ENV adds variables to the app's
// environment, e.g. 'DOTNET_PerfMapEnabled=1 DOTNET_PerfMapStubGranularity=2'.
import { createReadStream, existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { layout } from '../../src/bundle/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { foldStream, type FoldResult } from '../../src/stacks/fold.js';
import { frameKinds } from '../../src/stacks/frame-kind.js';
import { loadBundleResolver } from '../../src/symbols/bundle-resolver.js';
import { formatNamingAdvice, namingAdvice } from '../../src/symbols/naming-advice.js';
import { recordFixtureFromSidecar, sidecarWorkDir } from '../../test/naming/fixture-in-sidecar.js';
import { cliPath } from '../../test/support/cli.js';

const percent = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');

async function record(): Promise<string> {
  if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build\` first`);
  if (process.getuid?.() !== 0) throw new Error('recording from a sidecar needs root (or set PROFCPU_BENCH_DIR)');
  const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 10);
  const work = await sidecarWorkDir();
  const env = Object.fromEntries(
    (process.env['PROFCPU_BENCH_ENV'] ?? '')
      .split(/\s+/)
      .filter(Boolean)
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
  const recording = await recordFixtureFromSidecar({ work, seconds, env });
  const set = Object.entries(env).map(([key, value]) => `${key}=${value}`);
  try {
    console.log(
      `recording   the fixture app (test/fixtures/dotnet-app, ${set.length ? set.join(' ') : 'nothing'} set in its environment) as PID 1 of its own ` +
        `PID and mount namespaces, recorded from a sidecar (test/naming/fixture-in-sidecar.ts):\n` +
        `            node ${cliPath} ${recording.argv.join(' ')}`,
    );
    if (recording.exitCode !== 0) throw new Error(`collect failed:\n${recording.output}`);
    return recording.dir;
  } finally {
    await recording.target.kill();
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
if (!existsSync(join(dir, layout.perfData))) throw new Error(`${join(dir, layout.perfData)} is missing`);
console.log(`folder      ${dir}`);
// The folder's FlameScope file carries the names profcpu resolved; both figures start from perf's own text, which a
// postprocess of a copy without a resolver gives (the perf map placed as collect does, nothing named after perf).
const plainDir = await mkdtemp(join(tmpdir(), 'profcpu-bench-naming-'));
await cp(dir, plainDir, { recursive: true });
await postprocess(plainDir, { resolver: undefined, tarball: false, force: true });
const script = join(plainDir, layout.perfScript);

const plain = await foldStream(createReadStream(script));
report('perf + map ', plain);

const warnings: string[] = [];
const loadStarted = performance.now();
const loaded = await loadBundleResolver(dir, (m) => warnings.push(m));
const loadMs = performance.now() - loadStarted;
const started = performance.now();
const named = await foldStream(createReadStream(script), {}, undefined, loaded);
const ms = performance.now() - started;
report('profcpu    ', named);
if (loaded) {
  const { perfMap, jitDump, procMaps, readyToRun } = loaded.sources;
  console.log(
    `sources     perf map ${perfMap?.symbols ?? 'none'}, jitdump ${jitDump?.symbols ?? 'none'} ` +
      `(${jitDump?.readyToRun ?? 0} ReadyToRun), assemblies ${readyToRun?.images ?? 0} ` +
      `(${readyToRun?.methods ?? 0} ReadyToRun code blocks), maps ${procMaps?.mappings ?? 'none'}; ` +
      `resolver ${JSON.stringify(loaded.stats)} (distinct frame lines); load ${loadMs.toFixed(0)} ms, fold ${ms.toFixed(0)} ms`,
  );
}
for (const w of warnings) console.log(`warning     ${w}`);
const advice = namingAdvice(named.quality, { sources: loaded?.sources, resolver: loaded?.stats });
for (const line of advice ? formatNamingAdvice(advice) : []) console.log(`advice      ${line}`);
await rm(plainDir, { recursive: true, force: true });

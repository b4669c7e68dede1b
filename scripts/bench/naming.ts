// `npm run bench naming [-- --app net8,net9,net10,aspnet]`: how much of a .NET app's profile is named, per app and
// per setting, next to the original tool's approach. The apps: the fixture app (test/fixtures/dotnet-app) on .NET 8
// and 9 (self-contained) and 10, and the ASP.NET app (scripts/bench/aspnet-app, .NET 10) under Debian's `wrk` load
// (wrk -t1 -c16 against its /work endpoint). Each app runs twice: with nothing set in its environment, and with
// DOTNET_PerfMapEnabled=1 from the start; each run is PID 1 of its own PID and mount namespaces, recorded by the built
// CLI (`npm run build` first) from a sidecar joined to that PID namespace (needs root), whose command is printed.
//
// Per run it prints, from the same perf-script text:
// - profcpu: the share of samples whose app and framework frames are all named (the summary's headline; unnamed
//   frames inside native libraries such as libcoreclr.so and libclrjit.so are forgiven: debug files name them),
//   and the samples left unnamed by cause (an unlogged runtime stub, JIT code without a name, precompiled code
//   without a name, no mapping at all: a broken frame-pointer chain);
// - perf + map, the original tool's approach: what `perf script` alone names with the runtime's perf-PID.map placed
//   where perf finds it (with nothing set, that map exists only because collect switched it on over IPC: without
//   profcpu the original approach has none and names no JIT frame). It reads the same recording: stack copies, as
//   collect records by default where they fit, which perf unwinds by CFI alone, stopping at the first JIT frame
//   (PROFCPU_BENCH_COLLECT_ARGS='--unwind fp' gives the frame-pointer chains the original tool recorded).
// A table of every run closes the output.
//
// PROFCPU_BENCH_DIR=<folder> measures an existing output folder instead (post-processed, with perf.data);
// PROFCPU_BENCH_SECONDS sets each recording's length (default 10); PROFCPU_BENCH_ENV adds variables to every app's
// environment, e.g. 'DOTNET_PerfMapStubGranularity=2'; PROFCPU_BENCH_COLLECT_ARGS adds arguments to every collect,
// e.g. '--unwind mixed'.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createReadStream, existsSync } from 'node:fs';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { layout } from '../../src/output/layout.js';
import { postprocess } from '../../src/postprocess/postprocess.js';
import { foldStream, type FoldResult } from '../../src/stacks/fold.js';
import { frameKinds } from '../../src/stacks/frame-kind.js';
import { loadFolderResolver } from '../../src/dotnet/naming/folder-resolver.js';
import { formatNamingAdvice, namingAdvice } from '../../src/postprocess/naming-advice.js';
import { recordFixtureFromSidecar, sidecarWorkDir } from '../../test/naming/fixture-in-sidecar.js';
import { cliPath } from '../../test/support/cli.js';
import type { DotnetVersion } from '../../test/support/dotnet-app.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const appNames = ['net8', 'net9', 'net10', 'aspnet'] as const;
type AppName = (typeof appNames)[number];
const settings = [
  { label: 'nothing set', env: {} },
  { label: 'DOTNET_PerfMapEnabled=1', env: { DOTNET_PerfMapEnabled: '1' } },
] as const;
const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 10);
const collectArgs = (process.env['PROFCPU_BENCH_COLLECT_ARGS'] ?? '').split(' ').filter((arg) => arg !== '');
const extraEnv = Object.fromEntries(
  (process.env['PROFCPU_BENCH_ENV'] ?? '')
    .split(/\s+/)
    .filter(Boolean)
    .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);

const percent = (part: number, whole: number) => (whole > 0 ? `${((100 * part) / whole).toFixed(1)}%` : 'n/a');

/** Why an unnamed frame has no name, from its folded name; undefined for a native library's (forgiven) frame. */
type Cause = 'stub' | 'jit' | 'precompiled' | 'no mapping';
const causes: readonly Cause[] = ['stub', 'jit', 'precompiled', 'no mapping'];

function causeOf(frame: string): Cause | undefined {
  if (!frame.startsWith('[') || !frame.endsWith(']')) return undefined;
  const inside = frame.slice(1, -1);
  if (inside.startsWith('.NET stub')) return 'stub';
  if (/^(memfd:|anon|perf-\d+\.map|heap$)/.test(inside) || inside.startsWith('//anon')) return 'jit';
  if (/\.(dll|exe)$/i.test(inside)) return 'precompiled';
  if (inside === 'unknown') return 'no mapping';
  return undefined;
}

interface Figures {
  samples: number;
  /** Samples whose app and framework frames are all named (the summary's headline). */
  named: number;
  /** Share of the stacks' weight with at least one unnamed frame of each cause. */
  byCause: Record<Cause, number>;
  weight: number;
}

function figures(fold: FoldResult): Figures {
  const byCause = Object.fromEntries(causes.map((c) => [c, 0])) as Record<Cause, number>;
  let weight = 0;
  for (const [stack, w] of fold.stacks) {
    weight += w;
    const seen = new Set<Cause>();
    for (const frame of stack.split(';').slice(1)) {
      const cause = causeOf(frame.replace(/_\[[jki]\]$/, ''));
      if (cause) seen.add(cause);
    }
    for (const cause of seen) byCause[cause] += w;
  }
  return { samples: fold.quality.samples, named: fold.quality.fullyNamedExceptLibraries, byCause, weight };
}

const causeText = (f: Figures) =>
  causes
    .filter((c) => f.byCause[c] > 0)
    .map((c) => `${c} ${percent(f.byCause[c], f.weight)}`)
    .join(', ') || 'none';

/** The ASP.NET app, published once into the bench's work folder; its executable. */
let aspnetApp: Promise<string> | undefined;
function publishAspnet(work: string): Promise<string> {
  aspnetApp ??= (async () => {
    await cp(join(root, 'scripts/bench/aspnet-app'), join(work, 'src'), { recursive: true });
    execFileSync('dotnet', ['publish', join(work, 'src'), '-c', 'Release', '-o', join(work, 'app'), '--nologo'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1', DOTNET_NOLOGO: '1' },
    });
    return join(work, 'app', 'AspnetLoad');
  })();
  return aspnetApp;
}

/** Waits for the web app to answer, then loads it with wrk for the warm-up and the recording. */
async function startLoad(url: string, loadSeconds: number): Promise<ChildProcess> {
  for (let i = 0; ; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 300) throw new Error(`the ASP.NET app did not answer at ${url}`);
    await sleep(100);
  }
  return spawn('wrk', ['-t1', '-c16', `-d${loadSeconds}s`, url], { stdio: 'ignore' });
}

/** Records one app with one setting; gives the output folder and a description of how. */
async function record(app: AppName, env: Record<string, string>, work: string, base: string): Promise<string> {
  const port = 18_500 + (process.pid % 1000);
  const url = `http://127.0.0.1:${port}/work`;
  let load: ChildProcess | undefined;
  const recording = await recordFixtureFromSidecar({
    work,
    seconds,
    env: { ...env, ...extraEnv },
    args: collectArgs,
    ...(app === 'aspnet'
      ? {
          app: { executable: await publishAspnet(base), args: ['--urls', `http://127.0.0.1:${port}`] },
          started: async () => {
            // The warm-up (3 s) and the recording, with room for collect's steps before perf starts.
            load = await startLoad(url, seconds + 20);
          },
        }
      : { version: Number(app.slice(3)) as DotnetVersion }),
  });
  try {
    const set = Object.entries({ ...env, ...extraEnv }).map(([key, value]) => `${key}=${value}`);
    const what =
      app === 'aspnet'
        ? `scripts/bench/aspnet-app under wrk -t1 -c16 ${url}`
        : `the fixture app on .NET ${app.slice(3)}`;
    console.log(
      `recording   ${what}, ${set.length ? set.join(' ') : 'nothing'} set in its environment, as PID 1 of its own ` +
        `PID and mount namespaces, from a sidecar (test/naming/fixture-in-sidecar.ts):\n` +
        `            node ${cliPath} ${recording.argv.join(' ')}`,
    );
    if (recording.exitCode !== 0) throw new Error(`collect failed:\n${recording.output}`);
    return recording.dir;
  } finally {
    load?.kill('SIGTERM');
    await recording.target.kill();
  }
}

function report(label: string, fold: FoldResult, f: Figures): void {
  const q = fold.quality;
  const kinds = frameKinds.map((k) => `${k} ${q.framesByKind[k]}`).join(', ');
  console.log(
    `${label} ${percent(f.named, f.samples)} of ${f.samples} samples fully named (native libraries forgiven), ` +
      `${percent(q.fullyNamedExceptCoreclr, q.samples)} forgiving libcoreclr.so only, ${percent(q.fullyNamed, q.samples)} every frame`,
  );
  console.log(`${' '.repeat(label.length)} unnamed by cause (share of samples): ${causeText(f)}`);
  console.log(`${' '.repeat(label.length)} frames: ${kinds}`);
  const cut = Object.entries(q.brokenChainsByFile)
    .sort(([, a], [, b]) => b - a)
    .map(([file, n]) => `${file} ${percent(n, q.samples)}`)
    .join(', ');
  console.log(
    `${' '.repeat(label.length)} broken call chains: ${percent(q.brokenChains, q.samples)} of samples${cut ? ` (${cut})` : ''}`,
  );
}

/** Prints and returns profcpu's figures and the original approach's for one output folder. */
async function measure(dir: string): Promise<{ profcpu: Figures; plain: Figures }> {
  if (!existsSync(join(dir, layout.perfData))) throw new Error(`${join(dir, layout.perfData)} is missing`);
  console.log(`folder      ${dir}`);
  // The folder's FlameScope file carries the names profcpu resolved; both figures start from perf's own text, which a
  // postprocess of a copy without a resolver gives (the perf map placed as collect does, nothing named after perf).
  const plainDir = await mkdtemp(join(tmpdir(), 'profcpu-bench-naming-'));
  try {
    await cp(dir, plainDir, { recursive: true });
    await postprocess(plainDir, { resolver: undefined, tarball: false, force: true });
    const script = join(plainDir, layout.perfScript);

    const plainFold = await foldStream(createReadStream(script));
    const plain = figures(plainFold);
    report('perf + map ', plainFold, plain);

    const warnings: string[] = [];
    const loadStarted = performance.now();
    const loaded = await loadFolderResolver(dir, (m) => warnings.push(m));
    const loadMs = performance.now() - loadStarted;
    const started = performance.now();
    const named = await foldStream(createReadStream(script), {}, undefined, loaded);
    const ms = performance.now() - started;
    const profcpu = figures(named);
    report('profcpu    ', named, profcpu);
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
    return { profcpu, plain };
  } finally {
    await rm(plainDir, { recursive: true, force: true });
  }
}

const given = process.env['PROFCPU_BENCH_DIR'];
if (given) {
  await measure(given);
} else {
  const { values } = parseArgs({ options: { app: { type: 'string', multiple: true } } });
  const wanted = (values.app ?? [...appNames]).flatMap((a) => a.split(','));
  for (const a of wanted)
    if (!(appNames as readonly string[]).includes(a)) throw new Error(`--app ${a}: one of ${appNames.join(', ')}`);
  if (!existsSync(cliPath)) throw new Error(`${cliPath} is missing: run \`npm run build\` first`);
  if (process.getuid?.() !== 0) throw new Error('recording from a sidecar needs root (or set PROFCPU_BENCH_DIR)');
  if (wanted.includes('aspnet'))
    try {
      execFileSync('sh', ['-c', 'command -v wrk'], { stdio: 'ignore' });
    } catch {
      throw new Error('the ASP.NET app is loaded with wrk: apt-get install wrk (scripts/setup.sh --test does)');
    }
  const base = await mkdtemp('/var/tmp/profcpu-bench-naming-');
  const rows: { app: string; setting: string; profcpu: Figures; plain: Figures }[] = [];
  try {
    for (const app of wanted as AppName[])
      for (const setting of settings) {
        console.log(`\n-- ${app}, ${setting.label}`);
        const work = await sidecarWorkDir();
        try {
          const dir = await record(app, setting.env, work, base);
          rows.push({ app, setting: setting.label, ...(await measure(dir)) });
        } finally {
          await rm(work, { recursive: true, force: true });
        }
      }
  } finally {
    await rm(base, { recursive: true, force: true });
  }
  console.log(
    `\nsummary (${seconds} s recordings, one run each; shares of samples; "perf + map" is the original tool's ` +
      'approach: perf script with the perf map, which with nothing set exists only because collect switched it on; ' +
      'on stack copies, collect’s default, perf’s DWARF unwinding stops at the first JIT frame)',
  );
  const header = ['app', 'setting', 'samples', 'profcpu named', 'profcpu unnamed by cause', 'perf + map named'];
  const table = rows.map((r) => [
    r.app,
    r.setting,
    String(r.profcpu.samples),
    percent(r.profcpu.named, r.profcpu.samples),
    causeText(r.profcpu),
    percent(r.plain.named, r.plain.samples),
  ]);
  const widths = header.map((h, i) => Math.max(h.length, ...table.map((row) => row[i]!.length)));
  for (const row of [header, ...table]) console.log(row.map((cell, i) => cell.padEnd(widths[i]!)).join('  '));
}

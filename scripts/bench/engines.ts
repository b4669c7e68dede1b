// Engines benchmark: records the whole machine under a CPU and kernel load into bench-out/engines-<N>k/perf.data (as
// many samples as asked, about: 10 000 samples a second at -F 5000 on 2 CPUs), then times, three runs each, `perf
// script` alone (what the perf engine waits for; twice: its text to /dev/null, the issue's figure, and to a file, as
// the original tool and postprocess write it), `profcpu postprocess --engine perf` and `--engine native` (built CLI, no
// tarball), and `--engine native` with prof.tar.gz, on a folder holding the kallsyms snapshot collect keeps, and naming
// no sample (what it costs before the first: every record read and ordered, every listed table loaded, kallsyms read
// but not parsed: that waits for a kernel frame), and prints wall seconds (median, min-max), CPU seconds and peak
// RSS, and the ratio the issue asks for: postprocess wall time over perf script's. Needs root and perf. `PROFCPU_BENCH_SAMPLES=10,100,1000` (thousands, the default) chooses
// the sizes; `PROFCPU_BENCH_CLI=path/to/main.js` times another build (a copy of main's dist, say);
// `PROFCPU_BENCH_RUNS=1` runs each once (1M samples take minutes); `PROFCPU_BENCH_ENGINES=native` leaves the perf
// engine out; NODE_EXTRA_CA_CERTS is left out of the runs' environment (support/node-env.ts). Never asserted: read the
// figures.
import { spawnSync } from 'node:child_process';
import { closeSync, cpSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { codeSymbols } from '../../src/kernel/kallsyms-step.js';
import { benchNodeEnv, describeNodeEnv } from './support/node-env.js';
import { summary, type Run } from './support/runs.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const out = `${root}bench-out/`;
const cli = process.env['PROFCPU_BENCH_CLI'] ?? `${root}dist/cli/main.js`;
const sizes = (process.env['PROFCPU_BENCH_SAMPLES'] ?? '10,100,1000').split(',').map(Number);
const runs = Number(process.env['PROFCPU_BENCH_RUNS'] ?? 3);
const engines = (process.env['PROFCPU_BENCH_ENGINES'] ?? 'perf,native').split(',') as ('perf' | 'native')[];

/** Runs the command under /usr/bin/time, its output to /dev/null, or to the file `stdout` names. */
function timed(command: string, args: string[], stdout?: string): Run {
  const out = stdout === undefined ? 'ignore' : openSync(stdout, 'w');
  const start = performance.now();
  const result = spawnSync('/usr/bin/time', ['-f', 'maxrss %M cpu %U %S', command, ...args], {
    stdio: ['ignore', out, 'pipe'],
    env: benchNodeEnv,
  });
  if (typeof out === 'number') closeSync(out);
  const seconds = (performance.now() - start) / 1000;
  const stderr = result.stderr?.toString() ?? '';
  if (result.status !== 0) throw new Error(`${command} ${args.join(' ')} failed: ${stderr.trim().slice(-300)}`);
  const usage = /maxrss (\d+) cpu ([\d.]+) ([\d.]+)/.exec(stderr)!;
  return { seconds, cpuSeconds: Number(usage[2]) + Number(usage[3]), peakMiB: Number(usage[1]) / 1024 };
}

function record(thousands: number): string {
  const dir = `${out}engines-${thousands}k`;
  if (existsSync(`${dir}/perf.data`)) return dir;
  mkdirSync(dir, { recursive: true });
  const seconds = Math.max(1, Math.round(thousands / 10));
  const load =
    `dd if=/dev/zero of=/dev/null bs=4k count=1000000000 & d=$!; ` +
    `node -e "const e=Date.now()+${seconds * 1000};let x=0;while(Date.now()<e)x+=Math.sqrt(x+1)"; kill $d 2>/dev/null; true`;
  const perf = ['record', '-q', '-a', '-g', '-k', '1', '-F', '5000', '-e', 'cpu-clock', '-o', `${dir}/perf.data`];
  const result = spawnSync('perf', [...perf, '--', 'sh', '-c', load], { stdio: 'ignore' });
  if (result.status !== 0) throw new Error('perf record failed (root and perf needed)');
  return dir;
}

/** The built postprocess module (next to the CLI), and a script running it on a folder with no sample kept. */
const postprocessModule = new URL('../postprocess/postprocess.js', new URL(cli, 'file:///')).href;
const floorScript = `
const [moduleUrl, dir] = process.argv.slice(1);
const { postprocess } = await import(moduleUrl);
try {
  await postprocess(dir, { engine: 'native', tarball: false, perfScriptArgs: ['--pid=2147483647'] });
} catch (error) {
  if (error.code !== 'NO_SAMPLES') throw error;
}`;

if (!existsSync(cli)) {
  console.log(`${cli} is missing: run \`npm run build\` first`);
  process.exit(1);
}
console.log(
  `engines: ${cli}, node ${process.version}, ${availableParallelism()} cpus, load ${loadavg()[0]!.toFixed(1)}`,
);
describeNodeEnv();
/** The code symbols of /proc/kallsyms, as collect keeps them. */
const kallsymsSnapshot = codeSymbols(readFileSync('/proc/kallsyms', 'utf8'));
if (kallsymsSnapshot === undefined) throw new Error('/proc/kallsyms hides its addresses (root needed)');
for (const thousands of sizes) {
  const dir = record(thousands);
  const samples = spawnSync('sh', ['-c', `perf script -i ${dir}/perf.data -F event 2>/dev/null | wc -l`]);
  console.log(`${dir.slice(root.length)}: ${String(samples.stdout).trim()} samples, ${runs} runs each`);
  const results = {
    script: [] as Run[],
    scriptToFile: [] as Run[],
    perf: [] as Run[],
    native: [] as Run[],
    tarball: [] as Run[],
    snapshot: [] as Run[],
    floor: [] as Run[],
  };
  for (let i = 0; i < runs; i++) {
    const scriptArgs = ['script', '-i', `${dir}/perf.data`, '--header', '--no-inline'];
    results.script.push(timed('perf', scriptArgs));
    // As the original shell tool ran it: its text written to a file, as postprocess writes perf_script.out.
    results.scriptToFile.push(timed('perf', scriptArgs, `${dir}-script.out`));
    rmSync(`${dir}-script.out`, { force: true });
    for (const engine of engines) {
      const copy = `${dir}-${engine}`;
      rmSync(copy, { recursive: true, force: true });
      cpSync(dir, copy, { recursive: true });
      results[engine].push(
        timed(process.execPath, [cli, 'postprocess', '--dir', copy, '--engine', engine, '--no-tarball', '-q']),
      );
    }
    // The whole run, prof.tar.gz included (compressed while the outputs are made).
    const copy = `${dir}-native`;
    rmSync(copy, { recursive: true, force: true });
    cpSync(dir, copy, { recursive: true });
    results.tarball.push(timed(process.execPath, [cli, 'postprocess', '--dir', copy, '--engine', 'native', '-q']));
    // A folder as collect writes it keeps the kernel's symbols (target/kallsyms, its code symbols): the native
    // engine reads that file rather than /proc/kallsyms, which the kernel writes out a page at a time (perf script
    // reads /proc/kallsyms either way).
    rmSync(copy, { recursive: true, force: true });
    cpSync(dir, copy, { recursive: true });
    mkdirSync(`${copy}/target`);
    writeFileSync(`${copy}/target/kallsyms`, kallsymsSnapshot);
    results.snapshot.push(
      timed(process.execPath, [cli, 'postprocess', '--dir', copy, '--engine', 'native', '--no-tarball', '-q']),
    );
    // What the native engine costs before it names a sample: the same run keeping only the samples of a process
    // that is not there (perf script's --pid), which reads and orders every record and loads every table perf.data
    // lists, then ends without outputs (NO_SAMPLES). The kernel's table is parsed at the first kernel frame, so not
    // here (about 30 ms of /proc/kallsyms's 5 MB here).
    rmSync(copy, { recursive: true, force: true });
    cpSync(dir, copy, { recursive: true });
    results.floor.push(timed(process.execPath, ['--input-type=module', '-e', floorScript, postprocessModule, copy]));
  }
  const script = summary('perf script alone', results.script);
  const scriptToFile = summary('  its text to a file', results.scriptToFile);
  const perf = results.perf.length > 0 ? summary('postprocess --engine perf', results.perf) : undefined;
  const native = summary('postprocess --engine native', results.native);
  const tarball = summary('  with prof.tar.gz', results.tarball);
  const snapshot = summary('  with target/kallsyms', results.snapshot);
  const floor = summary('  naming no sample', results.floor);
  console.log(
    `  postprocess / perf script: ${perf === undefined ? '' : `perf engine ${(perf / script).toFixed(2)}, `}` +
      `native engine ${(native / script).toFixed(2)} (${(tarball / script).toFixed(2)} with prof.tar.gz, ` +
      `${(snapshot / script).toFixed(2)} with target/kallsyms); ` +
      `over perf script writing a file: native engine ${(native / scriptToFile).toFixed(2)}; ` +
      `native engine naming no sample ${(floor / script).toFixed(2)}`,
  );
}

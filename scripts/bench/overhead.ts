// `npm run bench overhead`: what recording costs a .NET service. Publishes the web app in scripts/bench/aspnet-app,
// starts it on loopback (in a cgroup of its own where cgroup v2 allows, as a container would be), loads it with wrk,
// and alternates windows without and with `profcpu collect` recording it at 99 Hz. Prints each window's requests per
// second, the throughput while recording over the throughput without (median of the windows), and perf's and
// profcpu's CPU from each run's manifest. Needs root, perf, the .NET SDK and wrk (Debian package wrk), and the built
// CLI (`npm run build`).
// PROFCPU_BENCH_WINDOWS windows of each kind (default 8), PROFCPU_BENCH_SECONDS their length (default 10),
// PROFCPU_BENCH_SCOPE the collect --scope (default auto), PROFCPU_BENCH_CGROUP=0 keeps the app in its cgroup,
// PROFCPU_BENCH_UNWIND the collect --unwind (default auto, collect's; the data line says which was used),
// PROFCPU_BENCH_OFFCPU=1 records with --off-cpu (every switch off the CPU too; the data line says so, with the offCpu
// phase of postprocess; PROFCPU_BENCH_SWITCH_SHARE=N adds --switch-share N), PROFCPU_BENCH_PIN=1 gives the app the last CPU and wrk and collect (perf with it) the others,
// as a service with CPUs of its own and a sidecar beside it: what recording costs the service itself, steadier than
// all three sharing every CPU (where perf's CPU is the service's too, and this 2-CPU machine's rate swings by itself).
import { execFileSync, spawn } from 'node:child_process';
import { cp, mkdir, readFile, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { cgroupMounts } from '../../src/perf/record-scope.js';
import { cliPath } from '../../test/support/cli.js';

const root = fileURLToPath(new URL('../..', import.meta.url));
const windows = Number(process.env['PROFCPU_BENCH_WINDOWS'] ?? 8);
const seconds = Number(process.env['PROFCPU_BENCH_SECONDS'] ?? 10);
const scope = process.env['PROFCPU_BENCH_SCOPE'] ?? 'auto';
const unwind = process.env['PROFCPU_BENCH_UNWIND'] ?? 'auto';
const offCpu = process.env['PROFCPU_BENCH_OFFCPU'] === '1';
const switchShare = process.env['PROFCPU_BENCH_SWITCH_SHARE'];
const cpus = availableParallelism();
const pin = process.env['PROFCPU_BENCH_PIN'] === '1' && cpus > 1;
/** `command args` as given, or under taskset on the app's CPU or on the others. */
const pinned = (on: 'app' | 'others', command: string, args: string[]): [string, string[]] =>
  pin ? ['taskset', ['-c', on === 'app' ? String(cpus - 1) : `0-${cpus - 2}`, command, ...args]] : [command, args];
const port = 18_000 + (process.pid % 1000);
const url = `http://127.0.0.1:${port}/work`;
const work = join(root, 'bench-out', 'overhead');

function need(command: string, what: string): void {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`the overhead benchmark needs ${what} (\`${command}\` is not on PATH)`);
  }
}

/** Requests per second wrk reports for one window. */
function wrk(duration: number): number {
  const out = execFileSync(...pinned('others', 'wrk', ['-t1', '-c16', `-d${duration}s`, url]), { encoding: 'utf8' });
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out)?.[1];
  if (!rps) throw new Error(`wrk printed no rate:\n${out}`);
  return Number(rps);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

if (process.getuid?.() !== 0) throw new Error('the overhead benchmark records with perf: run it as root');
need('wrk', 'wrk (apt-get install wrk)');
need('dotnet', 'the .NET SDK');
need('perf', 'perf (apt-get install linux-perf)');
await rm(work, { recursive: true, force: true });
await mkdir(work, { recursive: true });
await cp(join(root, 'scripts/bench/aspnet-app'), join(work, 'src'), { recursive: true });
execFileSync(
  'dotnet',
  ['publish', join(work, 'src'), '-c', 'Release', '-o', join(work, 'app'), '--nologo', '-v', 'q'],
  {
    stdio: 'inherit',
  },
);

const app = spawn(
  ...pinned('app', 'dotnet', [join(work, 'app', 'AspnetLoad.dll'), '--urls', `http://127.0.0.1:${port}`]),
  {
    stdio: 'ignore',
    env: { ...process.env, DOTNET_CLI_TELEMETRY_OPTOUT: '1' },
  },
);
let cgroup: string | undefined;
try {
  const mounts = cgroupMounts(await readFile('/proc/self/mountinfo', 'utf8'));
  if (process.env['PROFCPU_BENCH_CGROUP'] !== '0' && mounts.v2 && !mounts.perfEventV1) {
    cgroup = join(mounts.v2, `profcpu-bench-${process.pid}`);
    await mkdir(cgroup);
    await writeFile(join(cgroup, 'cgroup.procs'), String(app.pid));
  }
  for (let i = 0; ; i++) {
    if (
      await fetch(url).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (i > 100) throw new Error('the web app did not answer');
    await sleep(100);
  }
  console.log(`app         scripts/bench/aspnet-app as pid ${app.pid}${cgroup ? ` in its own cgroup ${cgroup}` : ''}`);
  console.log(`load        wrk -t1 -c16 -d${seconds}s ${url}; collect --scope ${scope} -F 99, ${windows} windows each`);
  if (pin) console.log(`cpus        the app on CPU ${cpus - 1}; wrk and collect (perf with it) on CPUs 0-${cpus - 2}`);
  wrk(seconds); // warm-up: tiered compilation settles

  const plain: number[] = [];
  const profiled: number[] = [];
  const perfShare: number[] = [];
  const profcpuShare: number[] = [];
  const dataRates: number[] = [];
  const postprocessMs: number[] = [];
  const used = new Set<string>();
  for (let i = 0; i < windows; i++) {
    plain.push(wrk(seconds));
    const out = join(work, `run-${i}`);
    // The service is under load when collect starts, as a service is when someone profiles it: what it measures
    // before recording (its switch rate, for --switch-share auto) is the loaded service's.
    const warm = spawn(...pinned('others', 'wrk', ['-t1', '-c16', '-d1s', url]), { stdio: 'ignore' });
    const run = spawn(
      ...pinned(
        'others',
        process.execPath,
        [cliPath, 'collect', '--pid', String(app.pid), '--duration', String(seconds + 2), '--scope', scope].concat([
          '--unwind',
          unwind,
          ...(offCpu ? ['--off-cpu'] : []),
          ...(offCpu && switchShare !== undefined ? ['--switch-share', switchShare] : []),
          '--symbols',
          'none',
          '--output',
          out,
          '--quiet',
        ]),
      ),
      { stdio: 'ignore' },
    );
    const done = new Promise((resolve) => run.once('exit', resolve));
    await sleep(1500); // preflight and perf's start
    warm.kill();
    profiled.push(wrk(seconds));
    await done;
    const manifest = JSON.parse(await readFile(join(out, 'manifest.json'), 'utf8')) as {
      collect: {
        options: { unwind: string; compressed?: boolean };
        record: { seconds: number; scope: { kind: string } };
        cpuMs: { perf?: number; profcpu: number };
      };
      postprocess: { durationsMs: { perfScript: number; offCpu?: number } };
    };
    const { record, cpuMs, options } = manifest.collect;
    used.add(`${options.unwind}${options.compressed ? ', compressed' : ''}`);
    const bytes = (await stat(join(out, 'perf.data'))).size;
    dataRates.push(bytes / record.seconds);
    postprocessMs.push(manifest.postprocess.durationsMs.perfScript + (manifest.postprocess.durationsMs.offCpu ?? 0));
    perfShare.push((cpuMs.perf ?? NaN) / (record.seconds * 1000));
    profcpuShare.push(cpuMs.profcpu / (record.seconds * 1000));
    console.log(
      `window ${i + 1}    ${plain.at(-1)!.toFixed(0)} req/s without, ${profiled.at(-1)!.toFixed(0)} while recording ` +
        `(${record.scope.kind}); perf ${(perfShare.at(-1)! * 100).toFixed(1)} %, profcpu ${(profcpuShare.at(-1)! * 100).toFixed(1)} % of a core`,
    );
  }
  console.log(
    `throughput  while recording / without: ${(median(profiled) / median(plain)).toFixed(3)} ` +
      `(medians ${median(profiled).toFixed(0)} / ${median(plain).toFixed(0)} req/s; worst window ${(Math.min(...profiled) / median(plain)).toFixed(3)})`,
  );
  console.log(
    `cpu         perf median ${(median(perfShare) * 100).toFixed(1)} % (max ${(Math.max(...perfShare) * 100).toFixed(1)} %), ` +
      `profcpu median ${(median(profcpuShare) * 100).toFixed(1)} % of a core while recording`,
  );
  console.log(
    `data        --unwind ${unwind}${offCpu ? ' --off-cpu' : ''}${offCpu && switchShare !== undefined ? ` --switch-share ${switchShare}` : ''} (${[...used].join('; ')}): perf.data median ${(median(dataRates) / 1e6).toFixed(2)} MB a second recorded; ` +
      `reading it (perf.data to folded stacks) median ${median(postprocessMs).toFixed(0)} ms`,
  );
} finally {
  app.kill('SIGKILL');
  await sleep(300);
  if (cgroup) await rmdir(cgroup).catch(() => undefined);
}

#!/usr/bin/env node
// The real-engine test of the container walk-through (images/README.md), for CI: starts a private dockerd, makes
// the base images (debootstrapped Debian, .NET stand-ins), builds the sidecar and the sample target from this working
// tree, runs the target with a private /tmp, starts the sidecar with scripts/start-profiling-container.sh to run
// `profcpu collect`, and checks the results on the host: JIT-compiled method names in the folded stacks and a
// tarball that holds every file of the output folder. Then the same with --least-privilege, then with the target
// stopped mid-recording (docker stop, and its app exiting by itself), then the Kubernetes pod manifest played by
// podman (scripts/containers/kube-play.mjs). Prints the figures
// (build times, image sizes, launcher to flame graph) and exits non-zero on any failure; dockerd is stopped and its
// containers removed whatever happens.
//   node scripts/containers/test.mjs [--report FILE.json] [--keep-results] [--fresh]
// Needs root and Debian's docker.io, podman, debootstrap, jq, git, and the .NET SDK. The engine's images are kept in
// PROFCPU_IMAGE_CACHE (default /var/cache/profcpu-images) between runs as a build cache (PROFCPU_ENGINE_DIR moves
// the engine elsewhere); --fresh starts empty.
import { $, fs, path, sleep } from 'zx';
import { baseDefaults, buildDotnetStandIns, ensureRootfsTarball, importDebianBase } from './base-images.mjs';
import { buildSampleTarget, buildSidecar, formatBytes, imageDefaults, imageSize, repoRoot } from './build-images.mjs';
import { startEngine, stopEngine } from './engine.mjs';
import { profileKubernetesPod } from './kube-play.mjs';

const targetName = 'profcpu-ct-target';
/** The kernel release whose Debian sources (linux-source-<version>, in the image's trixie) perf is built from. */
const kernelVersion = '6.12';
const launcher = path.join(repoRoot, 'scripts/start-profiling-container.sh');
/** Methods of images/sample-target/Program.cs: only JIT-compiled code gets these names. */
const jitNames = [
  'SampleTarget.PrimeSieve::CountPrimes',
  'SampleTarget.Mandelbrot::',
  'SampleTarget.Hashing::HashWords',
];

function parseArgs(argv) {
  const report = argv.indexOf('--report');
  return {
    report: report >= 0 ? argv[report + 1] : undefined,
    keepResults: argv.includes('--keep-results'),
    fresh: argv.includes('--fresh'),
  };
}

async function checkPrerequisites() {
  if (process.getuid?.() !== 0) throw new Error('run as root: it starts dockerd and privileged containers');
  const missing = [];
  for (const [tool, pkg] of [
    ['dockerd', 'docker.io'],
    ['docker', 'docker.io'],
    ['runc', 'runc'],
    ['debootstrap', 'debootstrap'],
    ['jq', 'jq'],
    ['git', 'git'],
    ['dotnet', 'the .NET SDK'],
    ['podman', 'podman'],
  ])
    if ((await $({ nothrow: true, quiet: true })`command -v ${tool}`).exitCode !== 0) missing.push(`${tool} (${pkg})`);
  if (missing.length) throw new Error(`missing: ${missing.join(', ')}`);
  const layout = path.join(repoRoot, 'dist/output/layout.js');
  if (!fs.existsSync(layout)) throw new Error('dist/ is missing: run `npm run build` first');
  return (await import(layout)).layout;
}

const timed = async (fn) => {
  const started = Date.now();
  const value = await fn();
  return { value, seconds: (Date.now() - started) / 1000 };
};

async function waitForLog(env, container, pattern, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { stdout, stderr } = await $({ env, nothrow: true, quiet: true })`docker logs ${container}`;
    if (pattern.test(stdout + stderr)) return;
    if (Date.now() > deadline)
      throw new Error(
        `${container} did not print ${pattern} within ${timeoutMs / 1000} s; it said:\n${stdout}${stderr}`,
      );
    await sleep(500);
  }
}

async function filesUnder(dir, prefix = '') {
  const out = new Map();
  for (const entry of await fs.readdir(path.join(dir, prefix), { withFileTypes: true })) {
    const rel = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) for (const [k, v] of await filesUnder(dir, rel)) out.set(k, v);
    else if (entry.isFile()) out.set(rel, (await fs.stat(path.join(dir, rel))).size);
  }
  return out;
}

/**
 * Runs the launcher with `collect`, then checks the output folder it leaves in a fresh results folder. Failures that
 * leave figures to report (missing names, an incomplete tarball) are returned in `problems`; others throw.
 */
async function profileOnce({ env, layout, extraArgs, duration, label, perfVersion }) {
  const results = await fs.mkdtemp('/tmp/profcpu-ct-results-');
  const started = Date.now();
  const run = await $({
    env,
    nothrow: true,
    quiet: true,
  })`sh ${launcher} -c ${targetName} -o ${results} ${extraArgs} -- profcpu collect -duration ${duration}`;
  const output = run.stdout + run.stderr;
  if (run.exitCode !== 0) throw new Error(`${label}: launcher exited with ${run.exitCode}:\n${output}`);
  const folders = (await fs.readdir(results)).filter((n) => fs.statSync(path.join(results, n)).isDirectory());
  if (folders.length !== 1) throw new Error(`${label}: expected one output folder in ${results}, found ${folders}`);
  const folder = path.join(results, folders[0]);
  const svg = path.join(folder, layout.flamegraphSvg);
  if (!fs.existsSync(svg)) throw new Error(`${label}: no ${layout.flamegraphSvg} in ${folder}:\n${output}`);
  const figures = { label, toFlameGraph: ((await fs.stat(svg)).mtimeMs - started) / 1000, samples: 0, sampleTarget: 0 };
  const problems = [];

  const folded = await fs.readFile(path.join(folder, layout.foldedStacks), 'utf8');
  for (const line of folded.split('\n')) {
    const count = Number(/ (\d+)$/.exec(line)?.[1] ?? 0);
    figures.samples += count;
    if (line.includes('SampleTarget.')) figures.sampleTarget += count;
  }
  const absent = jitNames.filter((name) => !folded.includes(name));
  if (absent.length) problems.push(`JIT names missing from ${layout.foldedStacks}: ${absent.join(', ')}`);
  // Kernel frames keep their names (CAP_SYSLOG is granted with --least-privilege too).
  figures.unknownKernel = folded
    .split('\n')
    .filter((line) => line.includes('[unknown]_[k]'))
    .reduce((sum, line) => sum + Number(/ (\d+)$/.exec(line)?.[1] ?? 0), 0);
  if (figures.unknownKernel > figures.samples * 0.01)
    problems.push(`${figures.unknownKernel} of ${figures.samples} samples have an unnamed kernel frame`);
  // The image's perf (7.2 or later) does not spin on exited threads: the process is recorded as such, cheaply.
  const manifest = JSON.parse(await fs.readFile(path.join(folder, layout.manifest), 'utf8'));
  const { record, cpuMs } = manifest.collect;
  // The perf that recorded, from perf.data's header (postprocess may not run perf at all: its native engine is the
  // default, and the manifest's host.perfVersion then says so).
  figures.perfVersion = manifest.recording.perfVersion ?? manifest.host.perfVersion;
  figures.perfCpuShare = (cpuMs.perf ?? NaN) / (record.seconds * 1000);
  if (perfVersion !== undefined) {
    // A perf built from a kernel release's sources: the one asked for, chosen over the distribution's.
    if (!figures.perfVersion.startsWith(perfVersion))
      problems.push(`perf ${figures.perfVersion} ran, not the perf ${perfVersion} built from the kernel's sources`);
  } else if (record.perfSpinsOnThreadExit)
    problems.push(`the image's perf ${figures.perfVersion} spins on exited threads`);
  // The results belong to the user who ran the launcher (through sudo here), and the summary gives host paths.
  for (const file of [folder, ...(await filesUnder(folder)).keys()].map((f) => path.resolve(folder, f))) {
    const { uid, gid } = await fs.lstat(file);
    if (uid !== Number(env.SUDO_UID) || gid !== Number(env.SUDO_GID))
      problems.push(`${file} belongs to ${uid}:${gid}, not to the launcher's user ${env.SUDO_UID}:${env.SUDO_GID}`);
  }
  if (!output.includes(path.join(folder, layout.flamegraphSvg)))
    problems.push(`the summary does not print the host path ${path.join(folder, layout.flamegraphSvg)}`);

  // The tarball must hold every file of the folder (but itself), byte for byte.
  const unpacked = await fs.mkdtemp('/tmp/profcpu-ct-unpacked-');
  try {
    await $({ quiet: true })`tar -xzf ${path.join(folder, layout.tarball)} -C ${unpacked}`;
    const inFolder = await filesUnder(folder);
    inFolder.delete(layout.tarball);
    const inTarball = await filesUnder(path.join(unpacked, folders[0]));
    figures.files = inFolder.size;
    for (const file of inFolder.keys()) {
      if (!inTarball.has(file)) {
        problems.push(`${file} is missing from ${layout.tarball}`);
        continue;
      }
      const [a, b] = await Promise.all([
        fs.readFile(path.join(folder, file)),
        fs.readFile(path.join(unpacked, folders[0], file)),
      ]);
      if (!a.equals(b)) problems.push(`${file} differs in ${layout.tarball}`);
    }
    for (const file of inTarball.keys())
      if (!inFolder.has(file)) problems.push(`${layout.tarball} has ${file}, which the folder lacks`);
  } finally {
    await fs.rm(unpacked, { recursive: true, force: true });
  }
  return { figures, problems: problems.map((p) => `${label}: ${p}`), folder, results, output };
}

/** What a run's folder says of where JIT names come from: its target/ files, the snapshots' report, the sources read. */
async function namingEvidence(folder, manifest) {
  const target = path.join(folder, 'target');
  const files = await fs.readdir(target).catch(() => []);
  const sizes = await Promise.all(
    files.map(async (name) => `${name} ${(await fs.stat(path.join(target, name)).catch(() => undefined))?.size}`),
  );
  return JSON.stringify({
    target: sizes,
    snapshots: manifest.collect?.snapshots,
    sources: manifest.naming?.dotnet?.sources,
    resolved: manifest.naming?.dotnet?.resolved,
  });
}

/** The newest sample's time in a perf script text (CLOCK_MONOTONIC seconds), or NaN when it has none. */
function lastSampleTime(text) {
  let last = NaN;
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || /^\s/.test(line)) continue;
    const time = Number(/ (\d+\.\d+): /.exec(line)?.[1]);
    if (Number.isFinite(time) && !(time <= last)) last = time;
  }
  return last;
}

/**
 * The target stops in the middle of a recording, by `docker stop` or by its app exiting: every process of its PID
 * namespace dies, the sidecar too. The launcher must finish what was recorded in a fresh sidecar and print the
 * folder's host path; at most the last two seconds of samples may be lost (perf's timestamps and this process's
 * hrtime are both CLOCK_MONOTONIC of the one kernel).
 */
async function profileThroughStop({ env, layout, how, label }) {
  const name = `profcpu-ct-${how === 'exit' ? 'exits' : 'stopped'}`;
  await $({ env, quiet: true })`docker rm -f ${name}`.nothrow();
  const exitAfter = how === 'exit' ? ['--env', 'SAMPLE_TARGET_EXIT_AFTER=10'] : [];
  await $({ env, quiet: true })`docker run -d --name ${name} --tmpfs /tmp ${exitAfter} ${imageDefaults.sampleTarget}`;
  const results = await fs.mkdtemp('/tmp/profcpu-ct-results-');
  const problems = [];
  try {
    await waitForLog(env, name, /^ready/m, 120_000);
    const launch = $({
      env,
      nothrow: true,
      quiet: true,
    })`sh ${launcher} -c ${name} -o ${results} -- profcpu collect -duration 30`;
    let stoppedAt;
    if (how === 'docker stop') {
      await sleep(8000);
      stoppedAt = Number(process.hrtime.bigint()) / 1e9;
      await $({ env, quiet: true })`docker stop -t 2 ${name}`;
    }
    const run = await launch;
    const output = run.stdout + run.stderr;
    if (how === 'exit') {
      const logs = await $({ env, quiet: true })`docker logs ${name}`;
      stoppedAt = Number(/exiting at monotonic ([\d.]+)/.exec(logs.stdout)?.[1]);
    }
    if (run.exitCode !== 0) throw new Error(`${label}: launcher exited with ${run.exitCode}:\n${output}`);
    if (!/stopped during the recording/.test(output)) problems.push('the launcher did not say the target stopped');
    const folders = (await fs.readdir(results)).filter((n) => fs.statSync(path.join(results, n)).isDirectory());
    if (folders.length !== 1) throw new Error(`${label}: expected one output folder, found ${folders}:\n${output}`);
    const folder = path.join(results, folders[0]);
    if (!output.includes(folder)) problems.push(`the launcher did not print the host path ${folder}`);
    for (const file of [layout.flamegraphSvg, layout.flamegraphHtml, layout.speedscope, layout.tarball])
      if (!fs.existsSync(path.join(folder, file))) problems.push(`no ${file} in ${folder}`);
    const manifest = JSON.parse(await fs.readFile(path.join(folder, layout.manifest), 'utf8'));
    // perf sometimes finishes its file in the moment between the target's end and the kill; otherwise it was recovered.
    const recovered = manifest.postprocess.recovered;
    const folded = await fs.readFile(path.join(folder, layout.foldedStacks), 'utf8');
    const absent = jitNames.filter((n) => !folded.includes(n));
    if (absent.length)
      problems.push(`JIT names missing: ${absent.join(', ')}; ${await namingEvidence(folder, manifest)}`);
    const script = await fs.readFile(path.join(folder, layout.perfScript), 'utf8');
    const lostSeconds = stoppedAt - lastSampleTime(script);
    if (!(lostSeconds <= 2)) problems.push(`the last sample is ${lostSeconds.toFixed(2)} s before the target stopped`);
    const { uid } = await fs.lstat(path.join(folder, layout.perfData));
    if (uid !== Number(env.SUDO_UID)) problems.push(`perf.data belongs to ${uid}, not ${env.SUDO_UID}`);
    const figures = { label, samples: manifest.samples.parsed, recovered: Boolean(recovered), lostSeconds, stop: true };
    return { figures, problems: problems.map((p) => `${label}: ${p}`), folder, results, output };
  } finally {
    await $({ env, quiet: true })`docker rm -f ${name}`.nothrow();
  }
}

async function main(argv) {
  const options = parseArgs(argv);
  const started = Date.now();
  const layout = await checkPrerequisites();
  const engineDir = process.env.PROFCPU_ENGINE_DIR || path.join(baseDefaults.cacheDir, 'engine');
  const logDir = await fs.mkdtemp('/tmp/profcpu-ct-logs-');
  const figures = { builds: {}, sizes: {}, runs: [] };
  const runs = [];
  if (options.fresh) await stopEngine({ dir: engineDir });
  const engine = await startEngine({ dir: engineDir });
  // Interrupted (Ctrl-C, CI timeout): stop the engine and its containers, then die of the same signal.
  const onSignal = (signal) => {
    console.error(`container test: ${signal}, stopping the engine`);
    stopEngine({ dir: engineDir, keepData: true }).finally(() => process.kill(process.pid, signal));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    // As if a user (uid 4321) had run the launcher through sudo: the results must be theirs.
    const env = { ...process.env, DOCKER_HOST: engine.host, SUDO_UID: '4321', SUDO_GID: '4321' };
    const base = await timed(async () => {
      await importDebianBase({ env, tarball: await ensureRootfsTarball() });
      return buildDotnetStandIns({ env });
    });
    figures.builds.bases = base.seconds;
    const sidecar = await buildSidecar({ env, logDir });
    const target = await buildSampleTarget({ env, logDir });
    // perf built from Debian's linux-source-6.12 (the kernel-matched perf recipe of images/README.md).
    const kernelPerf = await buildSidecar({ env, logDir, image: `profcpu:kernel-${kernelVersion}`, kernelVersion });
    figures.builds.kernelPerf = kernelPerf.seconds;
    figures.sizes.kernelPerf = kernelPerf.bytes;
    figures.builds.sidecar = sidecar.seconds;
    figures.builds.sampleTarget = target.seconds;
    figures.sizes.sidecar = sidecar.bytes;
    figures.sizes.sampleTarget = target.bytes;
    figures.sizes.debianBase = await imageSize(env, baseDefaults.debianImage);
    figures.sizes.runtimeStandIn = await imageSize(env, baseDefaults.runtimeImage);

    // The target shares nothing with the sidecar but its PID namespace: its own /tmp (a tmpfs), no volumes.
    await $({ env, quiet: true })`docker rm -f ${targetName}`.nothrow();
    await $({ env, quiet: true })`docker run -d --name ${targetName} --tmpfs /tmp ${imageDefaults.sampleTarget}`;
    await waitForLog(env, targetName, /^ready/m, 120_000);

    runs.push(await profileOnce({ env, layout, extraArgs: [], duration: 10, label: 'privileged' }));
    runs.push(
      await profileOnce({ env, layout, extraArgs: ['--least-privilege'], duration: 5, label: 'least privilege' }),
    );
    runs.push(
      await profileOnce({
        env,
        layout,
        extraArgs: ['-k', kernelVersion],
        duration: 5,
        label: `perf built from linux-source-${kernelVersion}`,
        perfVersion: kernelVersion,
      }),
    );
    runs.push(await profileThroughStop({ env, layout, how: 'docker stop', label: 'docker stop mid-recording' }));
    runs.push(await profileThroughStop({ env, layout, how: 'exit', label: 'app exits mid-recording' }));
    await $({ env, quiet: true })`docker rm -f ${targetName}`.nothrow();
    runs.push(
      await profileKubernetesPod({
        dockerEnv: env,
        images: [imageDefaults.sidecar, imageDefaults.sampleTarget],
        cacheDir: baseDefaults.cacheDir,
        jitNames,
      }),
    );
    figures.runs = runs.map((r) => r.figures);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await stopEngine({ dir: engineDir, keepData: true });
    if (!options.keepResults)
      for (const r of runs.filter((x) => x.results)) await fs.rm(r.results, { recursive: true, force: true });
  }
  figures.totalSeconds = (Date.now() - started) / 1000;

  const problems = runs.flatMap((r) => r.problems);
  const b = figures.builds;
  console.log(problems.length ? 'container test FAILED' : 'container test passed');
  console.log(`  base images (debootstrap cache, .NET stand-ins): ${b.bases.toFixed(0)} s`);
  console.log(`  sidecar image: built in ${b.sidecar.toFixed(0)} s, ${formatBytes(figures.sizes.sidecar)}`);
  console.log(
    `  sidecar with perf from linux-source-${kernelVersion}: built in ${b.kernelPerf.toFixed(0)} s, ${formatBytes(figures.sizes.kernelPerf)}`,
  );
  console.log(
    `  sample target image: built in ${b.sampleTarget.toFixed(0)} s, ${formatBytes(figures.sizes.sampleTarget)}`,
  );
  console.log(
    `  (local stand-ins: debian:trixie-slim ${formatBytes(figures.sizes.debianBase)}, .NET runtime ${formatBytes(figures.sizes.runtimeStandIn)})`,
  );
  for (const r of figures.runs.filter((x) => x.stop))
    console.log(
      `  ${r.label}: ${r.samples} samples (perf.data ${r.recovered ? 'recovered' : 'finished by perf'}), the last ${r.lostSeconds.toFixed(2)} s before the target stopped`,
    );
  for (const r of figures.runs.filter((x) => x.pod))
    console.log(
      `  ${r.label}: podman ${r.podman} kube play, images loaded in ${r.loadSeconds.toFixed(0)} s, ${r.samples} samples from the sidecar, JIT names checked`,
    );
  for (const r of figures.runs.filter((x) => !x.stop && !x.pod))
    console.log(
      `  ${r.label}: launcher to flame graph ${r.toFlameGraph.toFixed(1)} s, ${r.samples} samples (${r.sampleTarget} with SampleTarget.* frames), ${r.unknownKernel} with an unnamed kernel frame, ${r.files} files in the tarball, perf ${r.perfVersion} used ${(r.perfCpuShare * 100).toFixed(1)} % of a core`,
    );
  console.log(`  total ${figures.totalSeconds.toFixed(0)} s; build logs in ${logDir}`);
  if (options.keepResults) for (const r of runs.filter((x) => x.folder)) console.log(`  results: ${r.folder}`);
  if (options.report) await fs.writeFile(options.report, `${JSON.stringify({ ...figures, problems }, null, 2)}\n`);
  if (problems.length) {
    for (const r of runs.filter((x) => x.problems.length))
      console.error(`--- ${r.figures.label}: collect said\n${r.output}`);
    throw new Error(problems.join('\n'));
  }
}

main(process.argv.slice(2)).catch((error) => {
  console.error(`container test FAILED: ${error.message}`);
  process.exitCode = 1;
});

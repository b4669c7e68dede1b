#!/usr/bin/env node
// Builds the images of images/ from this working tree: the profcpu sidecar and the sample .NET target. The build
// context is the files git knows about (tracked or not ignored), streamed as a tarball, so node_modules, dist and
// old results are never sent to the engine. Takes the engine's environment; gives each image's build time and
// size. By hand, with an engine running:
//   DOCKER_HOST=... node scripts/containers/build-images.mjs [--kernel-version 6.6]
// Machines behind a TLS-inspecting proxy: the CA certificates added under /usr/local/share/ca-certificates are passed
// to the build stages (BUILD_CA_CERTS), since npm ci runs inside the build.
import { $, fs, path } from 'zx';
import { fileURLToPath } from 'node:url';

export const repoRoot = fileURLToPath(new URL('../..', import.meta.url));

export const imageDefaults = Object.freeze({
  sidecar: 'profcpu:latest',
  sampleTarget: 'profcpu-sample-target:latest',
  /** Extra CA certificates (PEM) handed to the build stages; those this machine added to its trust store. */
  caDir: '/usr/local/share/ca-certificates',
});

/** The PEM text of the locally added CA certificates, or '' when there are none. */
export async function localCaCertificates(dir = imageDefaults.caDir) {
  const names = (await fs.readdir(dir).catch(() => [])).filter((n) => n.endsWith('.crt')).sort();
  const pems = await Promise.all(names.map((n) => fs.readFile(path.join(dir, n), 'utf8')));
  return pems.map((p) => p.trim()).join('\n');
}

/** Size of an image as the engine reports it, in bytes. */
export async function imageSize(env, image) {
  const { stdout } = await $({ env, quiet: true })`docker image inspect --format {{.Size}} ${image}`;
  return Number(stdout.trim());
}

/**
 * `docker build` of `dockerfile` (a path in the repository) with the repository's files as context. The build log
 * goes to `logFile`; on failure its end is in the error. Returns { image, seconds, bytes }.
 */
export async function buildFromRepository({ env, dockerfile, image, buildArgs = {}, logFile }) {
  const args = Object.entries(buildArgs).flatMap(([k, v]) => ['--build-arg', `${k}=${v}`]);
  const started = Date.now();
  const context = $({ cwd: repoRoot, quiet: true })`git ls-files -z --cached --others --exclude-standard`;
  // Files deleted in the working tree but still in the index would make tar fail: keep only what exists.
  const files = (await context).stdout.split('\0').filter((f) => f && fs.existsSync(path.join(repoRoot, f)));
  const list = path.join(path.dirname(logFile), `${path.basename(logFile)}.files`);
  await fs.writeFile(list, files.join('\0'));
  const build = await $({
    cwd: repoRoot,
    env,
    nothrow: true,
    quiet: true,
  })`tar --null -T ${list} -cf - | docker build -f ${dockerfile} ${args} -t ${image} - >${logFile} 2>&1`;
  await fs.rm(list, { force: true });
  if (build.exitCode !== 0) {
    const tail = (await fs.readFile(logFile, 'utf8')).split('\n').slice(-25).join('\n');
    throw new Error(`docker build of ${dockerfile} failed (full log ${logFile}):\n${tail}`);
  }
  return { image, seconds: (Date.now() - started) / 1000, bytes: await imageSize(env, image) };
}

export async function buildSidecar({ env, logDir, image = imageDefaults.sidecar, kernelVersion }) {
  const buildArgs = {};
  const ca = await localCaCertificates();
  if (ca) buildArgs.BUILD_CA_CERTS = ca;
  if (kernelVersion) buildArgs.KERNEL_VERSION = kernelVersion;
  return buildFromRepository({
    env,
    dockerfile: 'images/sidecar/Dockerfile',
    image,
    buildArgs,
    logFile: path.join(logDir, `build-sidecar${kernelVersion ? `-kernel-${kernelVersion}` : ''}.log`),
  });
}

export async function buildSampleTarget({ env, logDir, image = imageDefaults.sampleTarget }) {
  return buildFromRepository({
    env,
    dockerfile: 'images/sample-target/Dockerfile',
    image,
    logFile: path.join(logDir, 'build-sample-target.log'),
  });
}

export const formatBytes = (n) => `${(n / 1e6).toFixed(0)} MB`;

async function main(argv) {
  const env = { ...process.env };
  if (!env.DOCKER_HOST) throw new Error('set DOCKER_HOST to the engine (node scripts/containers/engine.mjs start)');
  const k = argv.indexOf('--kernel-version');
  const kernelVersion = k >= 0 ? argv[k + 1] : undefined;
  const logDir = await fs.mkdtemp('/tmp/profcpu-build-');
  const image = kernelVersion ? `profcpu:kernel-${kernelVersion}` : imageDefaults.sidecar;
  for (const built of [
    await buildSidecar({ env, logDir, image, kernelVersion }),
    await buildSampleTarget({ env, logDir }),
  ])
    console.log(`${built.image}: ${built.seconds.toFixed(0)} s, ${formatBytes(built.bytes)}`);
  console.log(`build logs in ${logDir}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`build-images: ${error.message}`);
    process.exitCode = 1;
  });
}

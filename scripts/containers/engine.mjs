#!/usr/bin/env node
// A private Docker engine for building and testing the images on a machine without systemd (the project's CI):
// starts Debian's dockerd by hand with its own data root, exec root, socket and pid file, and stops it again.
// Takes a state directory; gives the DOCKER_HOST to talk to it. By hand:
//   node scripts/containers/engine.mjs start   # prints `export DOCKER_HOST=...`
//   node scripts/containers/engine.mjs stop    # stops it and deletes its images and containers
// PROFCPU_ENGINE_DIR overrides the state directory (default /var/tmp/profcpu-engine).
import { $, fs, path, sleep } from 'zx';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const defaultEngineDir = process.env.PROFCPU_ENGINE_DIR || '/var/tmp/profcpu-engine';

const here = path.dirname(fileURLToPath(import.meta.url));
const runtimeWrapper = path.join(here, 'runc-without-sys-resource.sh');
/** CAP_SYS_RESOURCE is capability 24 (linux/capability.h). */
const capSysResource = 24n;

/** The engine's files, all derived from one directory so that `stop` finds what `start` made. */
export function engineLayout(dir = defaultEngineDir) {
  return {
    dir,
    dataRoot: path.join(dir, 'data'),
    // containerd puts unix sockets under the exec root: keep it short (sun_path holds 108 bytes).
    execRoot: `/run/profcpu-engine-${Buffer.from(dir).toString('hex').slice(-8)}`,
    socket: path.join(dir, 'docker.sock'),
    pidFile: path.join(dir, 'dockerd.pid'),
    log: path.join(dir, 'dockerd.log'),
    host: `unix://${path.join(dir, 'docker.sock')}`,
  };
}

/** True when this process's bounding set lacks CAP_SYS_RESOURCE, so runc cannot grant it to a container. */
export async function lacksCapSysResource() {
  const status = await fs.readFile('/proc/self/status', 'utf8');
  const bounding = /^CapBnd:\s*([0-9a-f]+)$/m.exec(status);
  return bounding !== null && (BigInt(`0x${bounding[1]}`) & (1n << capSysResource)) === 0n;
}

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function readPid(file) {
  try {
    const pid = Number.parseInt(await fs.readFile(file, 'utf8'), 10);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Starts dockerd and waits until it answers. Fails, with the tail of its log, when it does not within `timeoutMs`.
 * Returns the layout plus `workaround`: whether the CAP_SYS_RESOURCE runtime wrapper was registered.
 */
export async function startEngine({ dir = defaultEngineDir, timeoutMs = 60_000, log = console.error } = {}) {
  const e = engineLayout(dir);
  for (const tool of ['dockerd', 'docker', 'runc']) {
    if ((await $({ nothrow: true, quiet: true })`command -v ${tool}`).exitCode !== 0)
      throw new Error(`${tool} is missing: install Debian's docker.io (apt-get install docker.io)`);
  }
  const running = await readPid(e.pidFile);
  if (running !== undefined && alive(running))
    throw new Error(`an engine already runs from ${dir} (pid ${running}): stop it first (engine.mjs stop)`);
  await fs.mkdirp(e.dataRoot);
  const args = [
    `--data-root=${e.dataRoot}`,
    `--exec-root=${e.execRoot}`,
    `--host=${e.host}`,
    `--pidfile=${e.pidFile}`,
    '--storage-driver=overlay2',
  ];
  const workaround = await lacksCapSysResource();
  if (workaround) {
    if ((await $({ nothrow: true, quiet: true })`command -v jq`).exitCode !== 0)
      throw new Error('jq is missing (the runtime wrapper edits config.json with it): apt-get install jq');
    args.push(
      `--add-runtime=runc-without-sys-resource=${runtimeWrapper}`,
      '--default-runtime=runc-without-sys-resource',
    );
    log(`engine: root lacks CAP_SYS_RESOURCE here, containers run through ${path.basename(runtimeWrapper)}`);
  }
  // Detached, its output in a log file: the engine outlives this script when started by hand.
  const out = fs.openSync(e.log, 'a');
  const child = spawn('dockerd', args, { detached: true, stdio: ['ignore', out, out] });
  fs.closeSync(out);
  let exited = false;
  child.on('exit', () => (exited = true));
  child.unref();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const probe = await $({ nothrow: true, quiet: true, env: { ...process.env, DOCKER_HOST: e.host } })`docker version`;
    if (probe.exitCode === 0) break;
    if (Date.now() > deadline || exited) {
      const tail = (await fs.readFile(e.log, 'utf8')).split('\n').slice(-15).join('\n');
      await stopEngine({ dir, log });
      throw new Error(`dockerd did not start within ${timeoutMs / 1000} s; end of ${e.log}:\n${tail}`);
    }
    await sleep(500);
  }
  log(`engine: dockerd up at ${e.host}`);
  return { ...e, workaround };
}

async function mountsUnder(prefixes) {
  const mounts = await fs.readFile('/proc/self/mounts', 'utf8');
  return mounts
    .split('\n')
    .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
    .filter((point) => point && prefixes.some((p) => point === p || point.startsWith(`${p}/`)))
    .sort((a, b) => b.length - a.length);
}

/**
 * Stops the engine started from `dir` (SIGTERM, then SIGKILL after `graceMs`), unmounts what it left and, unless
 * `keepData`, deletes its images and containers. Safe to call when nothing runs.
 */
export async function stopEngine({
  dir = defaultEngineDir,
  graceMs = 20_000,
  keepData = false,
  log = console.error,
} = {}) {
  const e = engineLayout(dir);
  const pid = await readPid(e.pidFile);
  if (pid !== undefined && alive(pid)) {
    // Containers first, so that the sidecars and targets of a failed run do not outlive it.
    const env = { ...process.env, DOCKER_HOST: e.host };
    const ids = (await $({ nothrow: true, quiet: true, env })`docker ps -aq`).stdout.split('\n').filter(Boolean);
    if (ids.length) await $({ nothrow: true, quiet: true, env })`docker rm -f ${ids}`;
    process.kill(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (alive(pid) && Date.now() < deadline) await sleep(200);
    if (alive(pid)) {
      log(`engine: dockerd (pid ${pid}) ignored SIGTERM for ${graceMs / 1000} s, killing it`);
      process.kill(pid, 'SIGKILL');
      while (alive(pid)) await sleep(100);
    }
    log('engine: dockerd stopped');
  }
  for (const point of await mountsUnder([e.dataRoot, e.execRoot]))
    await $({ nothrow: true, quiet: true })`umount -l ${point}`;
  await fs.rm(e.execRoot, { recursive: true, force: true });
  await fs.rm(e.pidFile, { force: true });
  if (!keepData) await fs.rm(e.dataRoot, { recursive: true, force: true });
}

async function main(argv) {
  const [command] = argv;
  if (command === 'start') {
    const e = await startEngine();
    console.log(`export DOCKER_HOST=${e.host}`);
  } else if (command === 'stop') {
    await stopEngine({ keepData: argv.includes('--keep-data') });
  } else {
    console.error('usage: engine.mjs start | stop [--keep-data]');
    process.exitCode = 2;
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  main(process.argv.slice(2)).catch((error) => {
    console.error(`engine: ${error.message}`);
    process.exitCode = 1;
  });
}

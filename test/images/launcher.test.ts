// scripts/start-profiling-container.sh against a fake `docker` on PATH that answers `version`, `ps`, `inspect` and
// `image inspect` from environment variables and records every call, so each test reads the exact `docker run` the
// launcher would start.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { execa } from 'execa';
import { repoRoot } from '../support/cli.js';

const launcher = join(repoRoot, 'scripts/start-profiling-container.sh');

const fakeDocker = `#!/bin/sh
# Records the call, then answers like docker would.
printf '%s\\037' "$@" >>"$FAKE_DOCKER_LOG"
echo >>"$FAKE_DOCKER_LOG"
case "$1" in
  version) [ -z "\${FAKE_DOCKER_DOWN-}" ] || { echo "Cannot connect to the Docker daemon" >&2; exit 1; } ;;
  ps) printf '%s' "\${FAKE_DOCKER_PS-}" ;;
  inspect)
    for last; do :; done
    line=$(printf '%s\\n' "\${FAKE_DOCKER_CONTAINERS-}" | awk -v c="$last" '$1 == c { $1 = ""; sub(/^ /, ""); print; exit }')
    [ -n "$line" ] || { echo "Error: No such container: $last" >&2; exit 1; }
    echo "$line" ;;
  image)
    for last; do :; done
    case " \${FAKE_DOCKER_IMAGES-} " in *" $last "*) echo '[{}]' ;; *) echo "Error: No such image: $last" >&2; exit 1 ;; esac ;;
  run)
    # The first run can play a sidecar killed with its target: FAKE_DOCKER_ON_RUN runs with its arguments, then 137.
    if [ -n "\${FAKE_DOCKER_ON_RUN-}" ] && [ ! -e "$FAKE_DOCKER_LOG.ran" ]; then
      : >"$FAKE_DOCKER_LOG.ran"
      sh -c "$FAKE_DOCKER_ON_RUN" sidecar "$@"
      exit 137
    fi
    echo "sidecar ran" ;;
  create)
    [ -z "\${FAKE_DOCKER_OLD-}" ] || { echo 'Error response from daemon: invalid CapAdd: unknown capability: "CAP_PERFMON"' >&2; exit 1; }
    echo 0123probe ;;
  rm) echo "$2" ;;
  *) echo "fake docker: unexpected $1" >&2; exit 3 ;;
esac
`;

let dir: string;
let bin: string;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-launcher-'));
  bin = join(dir, 'bin');
  await mkdir(bin);
  await writeFile(join(bin, 'docker'), fakeDocker);
  await chmod(join(bin, 'docker'), 0o755);
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const targetId = 'f00dcafe0123456789abcdef';
const oneTarget = {
  FAKE_DOCKER_PS: 'f00dcafe0123 my-service \nabcabcabc000 profcpu-sidecar sidecar\n',
  FAKE_DOCKER_CONTAINERS: `my-service true ${targetId} /my-service\nstopped false 0badbadbad /stopped\n`,
  FAKE_DOCKER_IMAGES: 'profcpu:latest profcpu:kernel-6.6 registry.example/profcpu:1.0',
};

let runs = 0;
async function launch(args: string[], env: Record<string, string> = {}) {
  const log = join(dir, `calls-${++runs}.log`);
  const home = join(dir, `home-${runs}`);
  await mkdir(home);
  const result = await execa('sh', [launcher, ...args], {
    reject: false,
    env: { PATH: `${bin}:/usr/bin:/bin`, HOME: home, FAKE_DOCKER_LOG: log, ...env },
    extendEnv: false,
    stdin: 'ignore',
  });
  const text = await readFile(log, 'utf8').catch(() => '');
  const calls = text
    .split('\n')
    .filter(Boolean)
    .map((line) => line.split('\x1f').slice(0, -1));
  const run = calls.find((c) => c[0] === 'run');
  return { ...result, calls, run, home };
}

test('with one container running, the launcher profiles it, privileged, sharing only its PID namespace', async () => {
  const r = await launch(['--', 'profcpu', 'collect', '-duration', '30'], oneTarget);
  assert.equal(r.exitCode, 0, r.stderr);
  assert.match(r.stderr, /profiling the only running container, my-service/);
  assert.equal(r.stdout, 'sidecar ran');
  const out = join(r.home, 'perf-profilings');
  assert.ok((await stat(out)).isDirectory(), 'the default results folder is created');
  // A name for this run, new each time, that collect records so the launcher can tell its folder from another's.
  const launcherRun = r.run?.find((a) => a.startsWith('PROFCPU_LAUNCHER_RUN='));
  assert.match(launcherRun ?? '', /^PROFCPU_LAUNCHER_RUN=\d+-\d+-[0-9a-f]{8}$/);
  assert.deepEqual(r.run, [
    'run',
    '--rm',
    '--privileged',
    `--pid=container:${targetId}`,
    '--label',
    'profcpu.role=sidecar',
    '--label',
    'profcpu.target=my-service',
    '--env',
    'PROFCPU_TARGET_CONTAINER=my-service',
    // The results are the user's, and the sidecar prints where they are on this host.
    '--env',
    `PROFCPU_OUTPUT_OWNER=${process.getuid!()}:${process.getgid!()}`,
    '--env',
    `PROFCPU_HOST_OUTPUT=${out}=/workspace/profilings`,
    '--env',
    launcherRun,
    '--volume',
    `${out}:/workspace/profilings`,
    'profcpu:latest',
    'profcpu',
    'collect',
    '-duration',
    '30',
  ]);
  // The one volume is the results folder: nothing of the host's (or the target's) /tmp is shared.
  assert.deepEqual(
    r.run!.filter((a, i) => r.run![i - 1] === '--volume').map((v) => v.split(':').at(-1)),
    ['/workspace/profilings'],
  );
});

test('with several containers running and no -c, the launcher names them and starts nothing', async () => {
  const r = await launch([], {
    ...oneTarget,
    FAKE_DOCKER_PS: 'aaa111 api \nbbb222 worker \nccc333 profcpu-x sidecar\n',
  });
  assert.equal(r.exitCode, 1);
  assert.match(
    r.stderr,
    /2 containers are running; say which to profile with -c NAME:\n {2}api \(aaa111\)\n {2}worker \(bbb222\)/,
  );
  assert.equal(r.run, undefined);
});

test('with no container running the launcher says so', async () => {
  const r = await launch([], { ...oneTarget, FAKE_DOCKER_PS: 'ccc333 profcpu-x sidecar\n' });
  assert.equal(r.exitCode, 1);
  assert.match(r.stderr, /no container is running/);
  assert.equal(r.run, undefined);
});

test('-c names the target; an unknown or stopped one is refused with a hint', async () => {
  const named = await launch(['-c', 'my-service', '-o', join(dir, 'out')], oneTarget);
  assert.equal(named.exitCode, 0, named.stderr);
  assert.ok(!named.calls.some((c) => c[0] === 'ps'), 'no listing when the target is named');
  assert.ok(named.run!.includes(`${join(dir, 'out')}:/workspace/profilings`));
  assert.equal(named.run!.at(-1), 'profcpu:latest', 'no command: the image opens its shell');

  const unknown = await launch(['-c', 'nope'], oneTarget);
  assert.equal(unknown.exitCode, 1);
  assert.match(unknown.stderr, /no container named 'nope'\n {2}List the running ones with: docker ps/);

  const stopped = await launch(['-c', 'stopped'], oneTarget);
  assert.equal(stopped.exitCode, 1);
  assert.match(stopped.stderr, /container 'stopped' is not running/);
  assert.equal(stopped.run, undefined);
});

test('--least-privilege grants PERFMON (SYS_ADMIN alone on older engines), SYS_PTRACE, SYS_ADMIN and SYSLOG, not --privileged', async () => {
  const r = await launch(['-c', 'my-service', '--least-privilege'], oneTarget);
  assert.equal(r.exitCode, 0, r.stderr);
  assert.ok(!r.run!.includes('--privileged'));
  for (const arg of [
    '--cap-add=PERFMON',
    '--cap-add=SYS_PTRACE',
    '--cap-add=SYS_ADMIN',
    // Without it /proc/kallsyms reads as zeros: every kernel frame unnamed.
    '--cap-add=SYSLOG',
    '--security-opt=seccomp=unconfined',
  ])
    assert.ok(r.run!.includes(arg), arg);
});

test('run through sudo, the results go to the user who ran sudo', async () => {
  const r = await launch(['-c', 'my-service'], { ...oneTarget, SUDO_UID: '1234', SUDO_GID: '5678' });
  assert.equal(r.exitCode, 0, r.stderr);
  assert.ok(r.run!.includes('PROFCPU_OUTPUT_OWNER=1234:5678'), r.run!.join(' '));
});

test('-k picks the image built for that kernel; a missing image gets the build command', async () => {
  const r = await launch(['-c', 'my-service', '-k', '6.6'], oneTarget);
  assert.equal(r.exitCode, 0, r.stderr);
  assert.ok(r.run!.includes('profcpu:kernel-6.6'));

  const missing = await launch(['-c', 'my-service', '-k', '6.12'], oneTarget);
  assert.equal(missing.exitCode, 1);
  assert.match(missing.stderr, /image profcpu:kernel-6\.12 is not here/);
  assert.match(missing.stderr, /--build-arg KERNEL_VERSION=6\.12 -t profcpu:kernel-6\.12/);

  const bad = await launch(['-c', 'my-service', '-k', 'latest'], oneTarget);
  assert.equal(bad.exitCode, 2);
  assert.match(bad.stderr, /-k wants a kernel version like 6\.6/);

  const port = await launch(['-c', 'my-service', '-k', '6.6'], {
    ...oneTarget,
    PROFCPU_IMAGE: 'registry.example:5000/profcpu',
    FAKE_DOCKER_IMAGES: 'registry.example:5000/profcpu:kernel-6.6',
  });
  assert.equal(port.exitCode, 0, port.stderr);
  assert.ok(port.run!.includes('registry.example:5000/profcpu:kernel-6.6'));

  const both = await launch(['-k', '6.6', '-i', 'x:1'], oneTarget);
  assert.equal(both.exitCode, 2);
  assert.match(both.stderr, /-k and -i both choose the image/);
});

test('-i and PROFCPU_IMAGE choose the image; PROFCPU_DOCKER_RUN_ARGS adds run arguments', async () => {
  const r = await launch(['-c', 'my-service', '-i', 'registry.example/profcpu:1.0'], oneTarget);
  assert.ok(r.run!.includes('registry.example/profcpu:1.0'));
  const env = await launch(['-c', 'my-service'], {
    ...oneTarget,
    PROFCPU_IMAGE: 'profcpu:kernel-6.6',
    PROFCPU_DOCKER_RUN_ARGS: '--cap-drop=SYS_RESOURCE --network=none',
  });
  assert.equal(env.exitCode, 0, env.stderr);
  assert.ok(env.run!.includes('profcpu:kernel-6.6'));
  assert.ok(env.run!.includes('--cap-drop=SYS_RESOURCE') && env.run!.includes('--network=none'));
});

test('the command after -- reaches the sidecar word for word', async () => {
  const r = await launch(
    ['-c', 'my-service', '--', 'profcpu', 'collect', '--name', 'My App', '--output', '*'],
    oneTarget,
  );
  assert.deepEqual(r.run!.slice(-7), ['profcpu:latest', 'profcpu', 'collect', '--name', 'My App', '--output', '*']);
});

test('usage errors exit 2; --help prints the options; an unreachable engine is reported', async () => {
  const unknown = await launch(['-x'], oneTarget);
  assert.equal(unknown.exitCode, 2);
  assert.match(unknown.stderr, /unknown option '-x'/);
  const noValue = await launch(['-c'], oneTarget);
  assert.equal(noValue.exitCode, 2);
  assert.match(noValue.stderr, /option -c needs a value/);
  const help = await launch(['--help'], oneTarget);
  assert.equal(help.exitCode, 0);
  assert.match(help.stdout, /^Starts the profcpu sidecar/);
  assert.match(help.stdout, /--least-privilege/);
  assert.equal(help.calls.length, 0);
  const down = await launch(['-c', 'my-service'], { ...oneTarget, FAKE_DOCKER_DOWN: '1' });
  assert.equal(down.exitCode, 1);
  assert.match(down.stderr, /'docker' cannot reach its engine/);
  const noDocker = await launch(['-c', 'my-service'], { DOCKER: 'no-such-docker' });
  assert.equal(noDocker.exitCode, 1);
  assert.match(noDocker.stderr, /'no-such-docker' is not on PATH/);
});

test('a sidecar killed with its target: only this run’s unfinished folder is finished, not another run’s', async () => {
  const out = join(dir, 'shared-results');
  await mkdir(out, { recursive: true });
  // Another launcher's recording, under way in the same results folder (a name with a space, too).
  const other = join(out, 'other run');
  await mkdir(join(other, 'target'), { recursive: true });
  await writeFile(join(other, 'perf.data'), 'recording');
  await writeFile(join(other, 'target', 'target.json'), '{ "launcherRun": "someone-else" }');
  // This run's sidecar makes its folder, records, and dies with the target.
  const onRun = [
    'for a; do case $a in PROFCPU_LAUNCHER_RUN=*) run=${a#*=} ;; esac; done',
    `mkdir -p "${out}/mine here/target"`,
    `: >"${out}/mine here/perf.data"`,
    `printf '{ "launcherRun": "%s" }' "$run" >"${out}/mine here/target/target.json"`,
  ].join('; ');
  const { exitCode, calls, stderr } = await launch(['-o', out], { ...oneTarget, FAKE_DOCKER_ON_RUN: onRun });
  assert.equal(exitCode, 0, stderr);
  const runs = calls.filter((c) => c[0] === 'run');
  assert.equal(runs.length, 2, 'the sidecar, then one postprocess');
  assert.deepEqual(runs[1]!.slice(-4), ['profcpu', 'postprocess', '-dir', '/workspace/profilings/mine here']);
  assert.match(stderr, /finishing what was recorded/);
});

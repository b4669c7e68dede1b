// The Kubernetes pod manifest (images/kubernetes/pod-shared-pid.yaml), run by an engine that reads Kubernetes YAML:
// Debian's podman (`podman kube play`), with a private storage and configuration under the image cache. Takes the
// images the Docker engine built (copied over with `docker save | podman load`); runs the pod, waits for the app,
// runs `profcpu collect` in the sidecar container with `podman exec` as `kubectl exec` would, and checks that the
// sidecar profiled the app container of the same pod (JIT-compiled method names in its folded stacks). Removes the
// pod whatever happens. Used by test.mjs; needs root and podman.
import { $, fs, path, sleep } from 'zx';
import { repoRoot } from './build-images.mjs';

const manifest = path.join(repoRoot, 'images/kubernetes/pod-shared-pid.yaml');
const podName = 'sample-target';

/**
 * What podman needs on these machines (FACTS.md §6: no systemd, root without CAP_SYS_RESOURCE): cgroupfs, the file
 * events logger, and explicit ulimits. Real machines need none of it.
 */
const containersConf = `[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
`;

/** Runs `podman ARGS` with the private storage; returns zx's output. */
function podman(ctx, args, options = {}) {
  return $({ env: ctx.env, quiet: true, ...options })`podman ${ctx.root} ${args}`;
}

async function context(dir) {
  await fs.mkdir(dir, { recursive: true });
  const conf = path.join(dir, 'containers.conf');
  await fs.writeFile(conf, containersConf);
  return {
    env: { ...process.env, CONTAINERS_CONF: conf },
    root: ['--root', path.join(dir, 'storage'), '--runroot', '/run/profcpu-podman'],
  };
}

/**
 * Plays the pod and profiles its app from its sidecar. `dockerEnv` reaches the engine holding `images`. Returns
 * figures and problems, like test.mjs's runs.
 */
export async function profileKubernetesPod({
  dockerEnv,
  images,
  cacheDir,
  jitNames,
  label = 'kubernetes pod (podman)',
}) {
  const ctx = await context(path.join(cacheDir, 'podman'));
  const started = Date.now();
  const problems = [];
  // docker save | podman load: the same images, under the names the manifest uses.
  const copy = 'docker save "$@" | podman ' + ctx.root.join(' ') + ' load';
  await $({ env: { ...dockerEnv, CONTAINERS_CONF: ctx.env.CONTAINERS_CONF }, quiet: true })`sh -c ${copy} sh ${images}`;
  const loadSeconds = (Date.now() - started) / 1000;
  await podman(ctx, ['pod', 'rm', '-f', '--ignore', podName], { nothrow: true });
  try {
    await podman(ctx, ['kube', 'play', '--network', 'none', manifest]);
    const app = `${podName}-app`;
    const sidecar = `${podName}-profcpu`;
    for (let waited = 0; ; waited += 500) {
      const logs = await podman(ctx, ['logs', app], { nothrow: true });
      if (/^ready/m.test(logs.stdout + logs.stderr)) break;
      if (waited > 120_000) throw new Error(`${label}: the app did not print "ready":\n${logs.stdout}${logs.stderr}`);
      await sleep(500);
    }
    const out = '/workspace/profilings/k8s';
    const collect = await podman(ctx, ['exec', sidecar, 'profcpu', 'collect', '-duration', '5', '-output', out], {
      nothrow: true,
    });
    const output = collect.stdout + collect.stderr;
    if (collect.exitCode !== 0) throw new Error(`${label}: collect exited with ${collect.exitCode}:\n${output}`);
    // The app is not PID 1 (the pod's infra container is): profcpu found it as the only .NET process.
    if (!/profiling process \d+ \(.*SampleTarget/.test(output) && !/only \.NET process/.test(output))
      problems.push('collect did not pick the app container’s .NET process');
    const folded = (await podman(ctx, ['exec', sidecar, 'cat', `${out}/folded_stacks.out`])).stdout;
    const absent = jitNames.filter((name) => !folded.includes(name));
    if (absent.length) problems.push(`JIT names missing from the pod's profile: ${absent.join(', ')}`);
    const samples = folded.split('\n').reduce((sum, line) => sum + Number(/ (\d+)$/.exec(line)?.[1] ?? 0), 0);
    const version = (await podman(ctx, ['version', '--format', '{{.Client.Version}}'])).stdout.trim();
    return {
      figures: { label, samples, podman: version, loadSeconds, pod: true },
      problems: problems.map((p) => `${label}: ${p}`),
      output,
      results: undefined,
    };
  } finally {
    await podman(ctx, ['pod', 'rm', '-f', '--ignore', podName], { nothrow: true });
  }
}

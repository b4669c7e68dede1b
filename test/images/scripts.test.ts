// The small shell scripts of the images, run for real with fake executables on PATH: the sidecar's entrypoint,
// the kernel-source perf stage's refusal paths (those that need no download), and the OCI runtime wrapper the
// container test registers with dockerd.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { execa } from 'execa';
import { repoRoot } from '../support/cli.js';

let dir: string;
let bin: string;

async function fake(name: string, body: string) {
  await writeFile(join(bin, name), `#!/bin/sh\n${body}\n`);
  await chmod(join(bin, name), 0o755);
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'profcpu-image-scripts-'));
  bin = join(dir, 'bin');
  await mkdir(bin);
  await fake('profcpu', 'echo "profcpu $*"');
  await fake('bash', 'echo "bash $*"');
  await fake('runc', 'echo "runc $*"');
});

after(async () => {
  await rm(dir, { recursive: true, force: true });
});

const env = () => ({ PATH: `${bin}:/usr/bin:/bin` });

test('entrypoint: a shell without arguments, the command given otherwise, profcpu for bare options', async () => {
  const entrypoint = join(repoRoot, 'images/sidecar/entrypoint.sh');
  const run = (args: string[]) => execa('sh', [entrypoint, ...args], { env: env(), stdin: 'ignore' });
  assert.equal((await run([])).stdout, 'bash ');
  assert.equal((await run(['profcpu', 'collect', '-duration', '5'])).stdout, 'profcpu collect -duration 5');
  assert.equal((await run(['--version'])).stdout, 'profcpu --version');
  assert.equal((await run(['echo', 'a b'])).stdout, 'a b');
});

test('build-perf.sh: no version only creates the folder; an unlisted version is refused before any download', async () => {
  const script = join(repoRoot, 'images/sidecar/build-perf.sh');
  const sums = join(repoRoot, 'kernel-versions/sha256sums');
  const dest = join(dir, 'opt-perf');
  const none = await execa('sh', [script, '', sums, dest], { env: env() });
  assert.match(none.stdout, /no KERNEL_VERSION given, the image uses the distribution's perf/);
  assert.deepEqual(await readdir(dest), []);

  const unlisted = await execa('sh', [script, '6.7', sums, dest], { env: env(), reject: false });
  assert.equal(unlisted.exitCode, 1);
  assert.match(
    unlisted.stderr,
    /linux-6\.7\.tar\.xz is not listed in kernel-versions\/sha256sums; listed:\n {2}6\.1\n {2}6\.6\n {2}6\.12\n/,
  );
  assert.match(unlisted.stderr, /https:\/\/cdn\.kernel\.org\/pub\/linux\/kernel\/v6\.x\/sha256sums\.asc/);

  const malformed = await execa('sh', [script, 'latest', sums, dest], { env: env(), reject: false });
  assert.equal(malformed.exitCode, 1);
  assert.match(malformed.stderr, /KERNEL_VERSION must look like 6\.6/);
});

test('runc wrapper: drops CAP_SYS_RESOURCE from every capability set of the bundle, then runs runc', async (t) => {
  const jq = await execa('sh', ['-c', 'command -v jq'], { reject: false });
  if (jq.exitCode !== 0) {
    if (process.env['CI'] === 'true') throw new Error('this test needs jq (Debian package jq), which is missing');
    t.skip('needs jq');
    return;
  }
  const bundle = join(dir, 'bundle');
  await mkdir(bundle);
  const config = {
    ociVersion: '1.0.2',
    process: {
      args: ['sh'],
      capabilities: {
        bounding: ['CAP_CHOWN', 'CAP_SYS_RESOURCE', 'CAP_SYS_ADMIN'],
        effective: ['CAP_SYS_RESOURCE', 'CAP_CHOWN'],
        permitted: ['CAP_SYS_RESOURCE'],
      },
    },
    root: { path: 'rootfs' },
  };
  await writeFile(join(bundle, 'config.json'), JSON.stringify(config));
  const wrapper = join(repoRoot, 'scripts/containers/runc-without-sys-resource.sh');
  const r = await execa(wrapper, ['--root', '/run/x', 'create', '--bundle', bundle, 'id1'], { env: env() });
  assert.equal(r.stdout, `runc --root /run/x create --bundle ${bundle} id1`);
  const edited = JSON.parse(await readFile(join(bundle, 'config.json'), 'utf8')) as typeof config;
  assert.deepEqual(edited.process.capabilities, {
    bounding: ['CAP_CHOWN', 'CAP_SYS_ADMIN'],
    effective: ['CAP_CHOWN'],
    permitted: [],
  });
  assert.deepEqual({ ...edited, process: { ...edited.process, capabilities: config.process.capabilities } }, config);

  // Commands without a bundle (state, kill, delete...) pass straight through.
  const state = await execa(wrapper, ['state', 'id1'], { env: env() });
  assert.equal(state.stdout, 'runc state id1');
});

// A hostile target, profiled from a sidecar (test/support/namespaces.ts): its /tmp/perf-1.map and /tmp/jit-1.dump are
// links out of it, FIFOs, devices, sparse giants. The sidecar holds secrets (its /tmp, its /etc/shadow, its
// environment, a host folder the target cannot see). Whatever the target plants, collect must read nothing outside
// the target, write nothing outside its output folder, and end within a deadline.
import assert from 'node:assert/strict';
import { lstat, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { list } from 'tar';
import { demoWorkload, namesWorkload, nodePerfMapFlags } from '../fixtures/node-burn/node-burn.js';
import {
  canStageHostileScenes as ready,
  collectInSidecar,
  hostSecretText,
  hostileScene,
  inSidecar,
  outsideState,
  scanForMarker,
  startHostileTarget,
  type HostileScene,
} from '../support/hostile.js';

const deadline = { timeout: 90_000 };

type Run = Awaited<ReturnType<typeof collectInSidecar>>;

/** collect ended by itself, in time, with success. */
function assertFinished(run: Run): void {
  assert.equal(run.timedOut, false, `collect did not end within ${60} s:\n${String(run.all)}`);
  assert.equal(run.exitCode, 0, String(run.all));
}

/** No marker in any output (tarball included), no link in the folder, nothing outside it created or changed. */
async function assertNothingLeaked(scene: HostileScene, extraOutside: string[] = []): Promise<void> {
  const scan = await scanForMarker(scene.out, scene.marker);
  assert.deepEqual(scan.hits, [], `a secret from outside the target is in the output`);
  assert.deepEqual(scan.links, [], 'the output folder holds links');
  assert.deepEqual(await outsideState(scene), {
    names: ['secret', ...extraOutside].sort(),
    secret: hostSecretText(scene),
  });
}

const absent = (path: string) =>
  lstat(path).then(
    () => false,
    () => true,
  );

test('the scene: the secrets exist in the sidecar, and the target cannot see them', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(t, scene, 'true');
  const run = await inSidecar(target, scene, [
    'sh',
    '-c',
    `cat /tmp/secret /etc/shadow '${scene.secret}'; echo "$PROFCPU_SIDECAR_SECRET"; ls /proc/1/root'${scene.dir}'`,
  ]);
  assert.equal(run.exitCode, 0, String(run.all));
  for (const where of ['sidecar-tmp', 'sidecar-shadow', 'host', 'sidecar-env'])
    assert.match(String(run.stdout), new RegExp(`${scene.marker}:${where}`));
  // The target's view of the scene's folder is an empty tmpfs.
  assert.doesNotMatch(String(run.stdout), /secret$/m);
});

test(
  'absolute links to the sidecar’s /tmp and to a host file are not followed out of the target',
  deadline,
  async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    const target = await startHostileTarget(
      t,
      scene,
      `ln -s /tmp/secret perf-1.map; ln -s '${scene.secret}' jit-1.dump`,
    );
    const run = await collectInSidecar(target, scene);
    assertFinished(run);
    await assertNothingLeaked(scene);
    assert.ok(
      await absent(join(scene.out, layout.perfMap(1))),
      'nothing to copy: the link leads nowhere in the target',
    );
    assert.ok(await absent(join(scene.out, layout.jitDump(1))));
  },
);

test('links to /etc/shadow read the target’s own, never the sidecar’s', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(
    t,
    scene,
    'ln -s /etc/shadow perf-1.map; ln -s /etc/../etc/shadow jit-1.dump',
  );
  const run = await collectInSidecar(target, scene);
  assertFinished(run);
  await assertNothingLeaked(scene);
  // The target's /etc/shadow is the host's here; a copy, if any, holds that and nothing else.
  const own = await readFile('/etc/shadow');
  for (const copy of [layout.perfMap(1), layout.jitDump(1)]) {
    const bytes = await readFile(join(scene.out, copy)).catch(() => undefined);
    if (bytes) assert.ok(own.subarray(0, bytes.length).equals(bytes), `${copy} is not the target's /etc/shadow`);
  }
});

test('relative links climbing out of the target stay inside it', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const up = '../'.repeat(12);
  const target = await startHostileTarget(
    t,
    scene,
    `ln -s '${up}${scene.secret.slice(1)}' perf-1.map; mkdir -p a/b; ln -s '../../${up}tmp/secret' a/b/link; ln -s a/b/link jit-1.dump`,
  );
  const run = await collectInSidecar(target, scene);
  assertFinished(run);
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))));
  assert.ok(await absent(join(scene.out, layout.jitDump(1))));
});

test('links through /proc/self/root lead back into the target, not to the sidecar', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(
    t,
    scene,
    `ln -s '/proc/self/root${scene.secret}' perf-1.map; ln -s /proc/self/root/tmp/secret jit-1.dump`,
  );
  const run = await collectInSidecar(target, scene);
  assertFinished(run);
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))));
  assert.ok(await absent(join(scene.out, layout.jitDump(1))));
});

test('links to /proc/1/environ and /proc/self/environ are refused: procfs is never copied', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const targetSecret = `${scene.marker}:target-env`;
  const target = await startHostileTarget(
    t,
    scene,
    'ln -s /proc/1/environ perf-1.map; ln -s /proc/self/environ jit-1.dump',
    {
      env: { ...process.env, PROFCPU_TARGET_SECRET: targetSecret },
    },
  );
  const run = await collectInSidecar(target, scene);
  assertFinished(run);
  // The target's own environment is no more to be written out than the sidecar's.
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))), 'target/perf-1.map copied from procfs');
  assert.ok(await absent(join(scene.out, layout.jitDump(1))), 'target/jit-1.dump copied from procfs');
});

test('a link loop ends at once', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(
    t,
    scene,
    'ln -s /tmp/a perf-1.map; ln -s /tmp/perf-1.map a; ln -s jit-1.dump jit-1.dump',
  );
  const run = await collectInSidecar(target, scene);
  assertFinished(run);
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))));
});

test('FIFOs as the perf map and jitdump (held open by the target) never block collect', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  // Held open for reading and writing by the target: a reader's open() succeeds and its read() waits forever.
  const target = await startHostileTarget(t, scene, 'mkfifo perf-1.map jit-1.dump; exec 3<>perf-1.map 4<>jit-1.dump');
  const started = Date.now();
  const run = await collectInSidecar(target, scene, [], { timeout: 45_000 });
  assertFinished(run);
  assert.ok(Date.now() - started < 30_000, `collect took ${Date.now() - started} ms`);
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))));
  assert.ok(await absent(join(scene.out, layout.jitDump(1))));
});

test('SIGTERM during the recording ends collect promptly, FIFOs in the target or not', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(t, scene, 'mkfifo perf-1.map jit-1.dump; exec 3<>perf-1.map 4<>jit-1.dump');
  const run = collectInSidecar(target, scene, [], { duration: 60, timeout: 45_000 });
  // The sidecar's process chain: unshare execs sh, which execs nsenter; nsenter forks the sh that execs node.
  let recording = false;
  run.stderr?.on('data', (chunk: Buffer) => (recording ||= /recording for/.test(String(chunk))));
  const nodePid = async (): Promise<number | undefined> => {
    const children = await readFile(`/proc/${run.pid}/task/${run.pid}/children`, 'utf8').catch(() => '');
    const child = Number(children.trim().split(/\s+/)[0]);
    const argv0 = await readFile(`/proc/${child}/cmdline`, 'utf8').catch(() => '');
    return argv0.split('\0')[0] === process.execPath ? child : undefined;
  };
  let pid: number | undefined;
  for (const until = Date.now() + 20_000; Date.now() < until && !(recording && pid);) {
    pid ??= await nodePid();
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  assert.ok(recording && pid, 'collect did not start recording');
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const signalled = Date.now();
  process.kill(pid, 'SIGTERM');
  const result = await run;
  const took = Date.now() - signalled;
  assert.equal(result.timedOut, false, `collect did not end after SIGTERM:\n${String(result.all)}`);
  assert.ok(took < 15_000, `collect took ${took} ms to end after SIGTERM`);
  await assertNothingLeaked(scene);
});

test('a character device as the perf map is never opened', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const target = await startHostileTarget(t, scene, 'mknod perf-1.map c 1 5; mknod jit-1.dump c 1 3');
  const run = await collectInSidecar(target, scene, [], { timeout: 45_000 });
  assertFinished(run);
  await assertNothingLeaked(scene);
  assert.ok(await absent(join(scene.out, layout.perfMap(1))), 'a copy of /dev/zero was made');
  assert.ok(await absent(join(scene.out, layout.jitDump(1))));
});

test(
  'a sparse 1.5 GB perf map is copied up to the cap, holes kept, with a warning naming the cap',
  deadline,
  async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    const target = await startHostileTarget(
      t,
      scene,
      `truncate -s 1500M perf-1.map; printf '7f0000001000 10 Sparse::Method\\n' >> perf-1.map`,
    );
    const run = await collectInSidecar(target, scene);
    assertFinished(run);
    await assertNothingLeaked(scene);
    // The map is the target's own: it is copied, up to the cap.
    const copy = await stat(join(scene.out, layout.perfMap(1)));
    assert.ok(copy.size > 0 && copy.size <= 256 << 20, `the copy is ${copy.size} bytes; the cap is 256 MiB`);
    assert.ok(copy.blocks * 512 < 16 << 20, `the copy uses ${copy.blocks * 512} bytes of disk: holes were filled`);
    assert.match(String(run.stderr), /268435456-byte|256 MiB|--snapshot-limit/, 'no warning names the cap');
  },
);

test(
  'an 8 MB method name in the perf map of the sampled code keeps the work and the outputs small',
  deadline,
  async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    // A Node target without --perf-basic-prof runs its optimized JavaScript in anonymous memory, where perf names frames
    // from /tmp/perf-1.map; the target wrote that map itself: one range over all of it, named with 8 MB of 'A'.
    const longName = `head -c 8388608 /dev/zero | tr '\\0' A`;
    const target = await startHostileTarget(
      t,
      scene,
      `{ printf '1000 7ffffffff000 '; ${longName}; echo; } > perf-1.map`,
      {
        exec: `exec '${process.execPath}' '${demoWorkload}' 60`,
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 1000)); // its hot functions get optimized
    const run = await collectInSidecar(target, scene, [], { duration: 2 });
    assertFinished(run);
    await assertNothingLeaked(scene);
    const script = await stat(join(scene.out, layout.perfScript));
    assert.ok(script.size < 50 << 20, `perf_script.out is ${script.size} bytes`);
    for (const file of [layout.foldedStacks, layout.flamegraphSvg, layout.flamegraphHtml, layout.speedscope]) {
      const { size } = await stat(join(scene.out, file));
      assert.ok(size < 50 << 20, `${file} is ${size} bytes`);
    }
    // Cutting what perf printed is not enough: perf must not print the name for every sample in the first place (a
    // 2 s recording reads a few MB of perf script; at 8 MB a sample, a 30 s one would make perf write ~100 GB).
    const manifest = JSON.parse(await readFile(join(scene.out, layout.manifest), 'utf8')) as {
      postprocess: { perfScriptBytes: number };
    };
    const read = manifest.postprocess.perfScriptBytes;
    assert.ok(read < 1 << 30, `perf script wrote ${read} bytes for ${String(run.stdout).match(/\d+ samples/)?.[0]}`);
  },
);

test(
  'the friendly case: a Node target’s JIT frames are named from the sidecar, and the raw data stays private',
  deadline,
  async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    const target = await startHostileTarget(t, scene, 'true', {
      exec: `exec '${process.execPath}' ${nodePerfMapFlags.join(' ')} '${demoWorkload}' 60`,
      ready: ({ hostPid }) =>
        stat(`/proc/${hostPid}/root/tmp/perf-1.map`).then(
          (s) => s.size > 0,
          () => false,
        ),
    });
    const run = await collectInSidecar(target, scene, [], { duration: 2 });
    assertFinished(run);
    await assertNothingLeaked(scene);
    const folded = await readFile(join(scene.out, layout.foldedStacks), 'utf8');
    assert.ok(namesWorkload(folded), `the workload's functions are not named:\n${folded}`);
    assert.ok((await stat(join(scene.out, layout.perfMap(1)))).size > 0, 'the perf map was snapshotted');

    // The tarball and the raw data in it are private: perf.data and target/ hold the target's code and names.
    assert.equal((await stat(join(scene.out, layout.tarball))).mode & 0o777, 0o600, 'prof.tar.gz on disk');
    const modes: [string, number][] = [];
    await list({ file: join(scene.out, layout.tarball), onReadEntry: (e) => modes.push([e.path, e.mode ?? -1]) });
    const raw = modes.filter(([path]) => /(^|\/)(perf\.data|target\/.*|target)$/.test(path.replace(/\/$/, '')));
    assert.ok(
      raw.some(([path]) => path.endsWith(layout.perfMap(1))),
      `no perf map in the tarball: ${modes.join(' ')}`,
    );
    for (const [path, mode] of raw)
      assert.equal((mode & 0o777).toString(8), path.endsWith('/') ? '700' : '600', `${path} in prof.tar.gz`);
  },
);

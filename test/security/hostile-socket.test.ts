// The diagnostic socket of a hostile target, looked up from a sidecar (test/support/namespaces.ts): the target's
// `dotnet-diagnostic-1-<key>-socket` is a link to a socket that lives only in the sidecar (whoever reaches a
// diagnostic socket can run code in its process, so a link must never lead profcpu to connect to one of the
// sidecar's), or its environment points TMPDIR and DOTNET_PerfMapJitDumpPath above its root. A listening server in
// the sidecar logs every connection: there must be none, and nothing of the sidecar's may reach the outputs.
import assert from 'node:assert/strict';
import { lstat, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { test } from 'node:test';
import { layout } from '../../src/output/layout.js';
import { repoRoot } from '../support/cli.js';
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
const probe = join(repoRoot, 'test/security/socket-probe.ts');

/** The target's start time in clock ticks, which names its socket: field 22 of /proc/1/stat (its comm has no space). */
const startTicks = `$(cut -d' ' -f22 /proc/1/stat)`;

/**
 * Shell text for the sidecar: a server listening on each of `paths` (shell words, expanded there), logging every
 * connection to `log`; returns once all of them listen.
 */
function listen(log: string, paths: string[]): string {
  const server =
    "const net = require('net'), fs = require('fs'); const [log, ...paths] = process.argv.slice(1);" +
    "for (const p of paths) net.createServer((c) => { fs.appendFileSync(log, 'connection to ' + p + '\\n'); c.destroy(); }).listen(p);";
  const waits = paths.map((p) => `while [ ! -S ${p} ]; do sleep 0.05; done`).join('; ');
  return `{ "${process.execPath}" -e "${server}" '${log}' ${paths.join(' ')} </dev/null >/dev/null 2>&1 & } && ${waits}`;
}

/** An empty log for the sidecar's servers, in the scene's folder (which the target cannot see). */
async function connectionLog(scene: HostileScene): Promise<string> {
  const log = join(scene.dir, 'connections.log');
  await writeFile(log, '');
  return log;
}

interface ProbeResult {
  find: { ok: boolean; code?: string; message?: string; value?: unknown };
  processInfo: { ok: boolean; code?: string; message?: string; value?: unknown };
  perfMapOn: { ok: boolean; code?: string; message?: string; value?: unknown };
}

async function runProbe(target: Parameters<typeof inSidecar>[0], scene: HostileScene, setup: string) {
  const run = await inSidecar(target, scene, [process.execPath, '--import', 'tsx', probe, '1'], {
    cwd: repoRoot,
    setup,
    timeout: 45_000,
  });
  assert.equal(run.timedOut, false, `the probe did not end:\n${String(run.all)}`);
  assert.equal(run.exitCode, 0, String(run.all));
  return JSON.parse(String(run.stdout).trim().split('\n').at(-1)!) as ProbeResult;
}

function assertRefused(result: ProbeResult): void {
  for (const [step, outcome] of Object.entries(result)) {
    assert.equal(outcome.ok, false, `${step} reached a socket: ${JSON.stringify(outcome)}`);
    assert.match(String(outcome.code), /^(IPC_UNREACHABLE|BAD_INPUT)$/, `${step}: ${JSON.stringify(outcome)}`);
  }
}

test('the scene: a sidecar’s server logs a connection made to it', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const log = await connectionLog(scene);
  const target = await startHostileTarget(t, scene, 'true');
  const connect = "require('net').connect('/tmp/sidecar.sock').on('close', () => process.exit(0))";
  const run = await inSidecar(target, scene, [process.execPath, '-e', connect], {
    setup: listen(log, ['/tmp/sidecar.sock']),
  });
  assert.equal(run.exitCode, 0, String(run.all));
  assert.equal(await readFile(log, 'utf8'), 'connection to /tmp/sidecar.sock\n');
});

const links: [string, string][] = [
  ['an absolute link', '/tmp/sidecar.sock'],
  ['a relative link climbing out', '../../../../../../tmp/sidecar.sock'],
  ['a link through /proc/self/root', '/proc/self/root/tmp/sidecar.sock'],
];

for (const [kind, link] of links) {
  test(`a diagnostic socket that is ${kind} to a sidecar's socket is never connected to`, deadline, async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    const log = await connectionLog(scene);
    const target = await startHostileTarget(t, scene, `ln -s '${link}' "dotnet-diagnostic-1-${startTicks}-socket"`);
    const result = await runProbe(target, scene, listen(log, ['/tmp/sidecar.sock']));
    assertRefused(result);
    assert.equal(await readFile(log, 'utf8'), '', 'the sidecar’s socket was connected to');
  });
}

test('TMPDIR above the target’s root does not lead to the sidecar’s /tmp', deadline, async (t) => {
  if (!ready(t)) return;
  const scene = await hostileScene(t);
  const log = await connectionLog(scene);
  const target = await startHostileTarget(t, scene, 'true', { env: { ...process.env, TMPDIR: '/../../../../tmp' } });
  // A real socket with the target's very name, in the sidecar's /tmp only.
  const result = await runProbe(target, scene, listen(log, [`/tmp/dotnet-diagnostic-1-${startTicks}-socket`]));
  assertRefused(result);
  assert.equal(await readFile(log, 'utf8'), '', 'the sidecar’s socket was connected to');
});

test(
  'a fake .NET target with TMPDIR and DOTNET_PerfMapJitDumpPath above its root: collect reads nothing of the sidecar’s',
  deadline,
  async (t) => {
    if (!ready(t)) return;
    const scene = await hostileScene(t);
    const log = await connectionLog(scene);
    // Any shared library mapped as .../Microsoft.NETCore.App/8.0.0/libcoreclr.so makes the target look like .NET 8.
    const runtime = '/tmp/dotnet/shared/Microsoft.NETCore.App/8.0.0';
    const target = await startHostileTarget(
      t,
      scene,
      `mkdir -p ${runtime}; for l in /lib/x86_64-linux-gnu/libm.so.6 /lib/aarch64-linux-gnu/libm.so.6 /usr/lib64/libm.so.6; do [ -e $l ] && cp $l ${runtime}/libcoreclr.so && break; done
     ln -s /tmp/sidecar.sock "dotnet-diagnostic-1-${startTicks}-socket"`,
      {
        env: { ...process.env, TMPDIR: '/../../../../tmp', DOTNET_PerfMapJitDumpPath: '/../../../../tmp/x' },
        exec: `LD_PRELOAD=${runtime}/libcoreclr.so exec /bin/sh -c 'while :; do :; done'`,
        // Ready once the burn loop runs with the fake runtime loaded (before that, the setup shell is the target).
        ready: ({ hostPid }) =>
          readFile(`/proc/${hostPid}/maps`, 'utf8').then(
            (maps) => maps.includes('Microsoft.NETCore.App/8.0.0/libcoreclr.so'),
            () => false,
          ),
      },
    );
    const maps = await readFile(`/proc/${target.hostPid}/maps`, 'utf8');
    assert.match(maps, /Microsoft\.NETCore\.App\/8\.0\.0\/libcoreclr\.so/, 'the fake runtime is not mapped');
    const plant = [
      'mkdir -p /tmp/x',
      `printf '7f0000001000 10 %s:sidecar-perf-map\\n' "$1" > /tmp/x/perf-1.map`,
      `printf '%s:sidecar-jitdump\\n' "$1" > /tmp/x/jit-1.dump`,
      listen(log, ['/tmp/sidecar.sock', `/tmp/dotnet-diagnostic-1-${startTicks}-socket`]),
    ].join(' && ');
    const run = await collectInSidecar(target, scene, ['--perfmap', 'auto'], { setup: plant, timeout: 45_000 });
    assert.equal(run.timedOut, false, `collect did not end:\n${String(run.all)}`);
    assert.equal(run.exitCode, 0, String(run.all));
    assert.equal(await readFile(log, 'utf8'), '', 'a sidecar’s socket was connected to');
    const scan = await scanForMarker(scene.out, scene.marker);
    assert.deepEqual(scan.hits, [], 'a secret of the sidecar is in the output');
    assert.deepEqual(scan.links, []);
    assert.deepEqual(await outsideState(scene), {
      names: ['connections.log', 'secret'],
      secret: hostSecretText(scene),
    });
    for (const copy of [layout.perfMap(1), layout.jitDump(1)])
      await assert.rejects(lstat(join(scene.out, copy)), `${copy} was copied from outside the target`);
  },
);

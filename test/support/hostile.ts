// A hostile target and a profcpu sidecar holding secrets, for the security tests (test/security/):
// - `hostileScene(t)`: a fresh folder under /var/tmp (the sidecar's working directory; outputs go to `out/`) with a
//   file `secret` holding a unique marker. The target never sees that folder (a tmpfs hides it in its namespace), so
//   reading it at all means following a link against the sidecar's root.
// - `startHostileTarget(t, scene, setup)`: runs the shell text `setup` as PID 1 of its own PID and mount namespace
//   (private tmpfs /tmp, where `setup` plants links, FIFOs, devices...), then burns CPU in a shell loop.
// - `inSidecar(target, scene, argv)`: runs a command in the target's sidecar after planting more of the marker
//   there: /tmp/secret, /etc/shadow (a bind mount private to the sidecar) and the variable PROFCPU_SIDECAR_SECRET.
//   `collectInSidecar` runs a short `profcpu collect` that way.
// - `scanForMarker(dir, marker)`: every file of a folder (gzip files decompressed, links not followed) holding the
//   marker, and every link found.
import { createReadStream } from 'node:fs';
import { lstat, readdir, readFile, readlink, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createGunzip } from 'node:zlib';
import { canRecord, needCommand } from './requirements.js';
import type { TestContext } from 'node:test';
import { cliPath } from './cli.js';
import {
  startInSidecar,
  startNamespacedTarget,
  type NamespacedTarget,
  type NamespacedTargetOptions,
  type SidecarOptions,
} from './namespaces.js';
import { tempDir } from './temp.js';

export interface HostileScene {
  /** A fresh folder under /var/tmp, hidden from the target: the sidecar's working directory. */
  dir: string;
  /** The output folder given to collect (`dir/out`). */
  out: string;
  /** A file outside the target holding the marker (`dir/secret`). */
  secret: string;
  /** Unique text in every secret planted; it must appear in no output. */
  marker: string;
}

/** What every hostile scene needs: root, perf, and nsenter for the sidecar; false (the test skipped) without. */
export function canStageHostileScenes(t: TestContext): boolean {
  return canRecord(t) && needCommand(t, 'nsenter', 'util-linux');
}

export async function hostileScene(t: TestContext): Promise<HostileScene> {
  const dir = await tempDir(t, 'hostile', '/var/tmp');
  const marker = `PROFCPU-SECRET-${randomBytes(8).toString('hex')}`;
  const secret = join(dir, 'secret');
  await writeFile(secret, `${marker}:host\n`);
  return { dir, out: join(dir, 'out'), secret, marker };
}

/** The content `hostileScene` wrote in `scene.secret`. */
export const hostSecretText = (scene: HostileScene) => `${scene.marker}:host\n`;

/** A CPU-burning shell loop, the target's final program (its argv[0] is not `sh`: startNamespacedTarget waits for it). */
export const burnLoop = `exec /bin/sh -c 'while :; do :; done'`;

export interface HostileTargetOptions {
  env?: NodeJS.ProcessEnv;
  /** What the target runs after `setup` (default `burnLoop`). */
  exec?: string;
  /** Resolves true once the target is ready (see startNamespacedTarget). */
  ready?: NamespacedTargetOptions['ready'];
}

/** Starts a target that first runs `setup` (shell text, in its own mount namespace with its own /tmp). */
export async function startHostileTarget(
  t: TestContext,
  scene: HostileScene,
  setup: string,
  options: HostileTargetOptions = {},
): Promise<NamespacedTarget> {
  const script = `set -e; mount -t tmpfs tmpfs '${scene.dir}'; cd /tmp; ${setup}\n${options.exec ?? burnLoop}`;
  const target = await startNamespacedTarget('sh', ['-c', script], {
    cwd: '/',
    env: options.env ?? process.env,
    ...(options.ready && { ready: options.ready }),
  });
  t.after(() => target.kill());
  return target;
}

export interface InSidecarOptions extends SidecarOptions {
  /** Shell text run in the sidecar after the secrets are planted and before the command. */
  setup?: string;
}

/** Runs `argv` in a sidecar of the target, with the marker planted in the sidecar's /tmp, /etc/shadow and env. */
export function inSidecar(
  target: NamespacedTarget,
  scene: HostileScene,
  argv: readonly string[],
  options: InSidecarOptions = {},
) {
  const { setup, ...rest } = options;
  const plant = [
    `printf '%s:sidecar-tmp\\n' "$1" > /tmp/secret`,
    `printf 'root:%s:sidecar-shadow:0:99999:7:::\\n' "$1" > /tmp/shadow`,
    'mount --bind /tmp/shadow /etc/shadow',
    setup ?? ':',
    'shift',
    'exec "$@"',
  ].join(' && ');
  return startInSidecar(target.hostPid, 'sh', ['-c', plant, 'sidecar', scene.marker, ...argv], {
    cwd: scene.dir,
    timeout: 60_000,
    forceKillAfterDelay: 2_000,
    ...rest,
    env: { PROFCPU_SIDECAR_SECRET: `${scene.marker}:sidecar-env`, ...rest.env },
  } as SidecarOptions);
}

/** `profcpu collect --pid 1 --duration 1 --symbols none --perfmap off --output scene.out ...extra` in the sidecar. */
export function collectInSidecar(
  target: NamespacedTarget,
  scene: HostileScene,
  extra: readonly string[] = [],
  options: InSidecarOptions & { duration?: number } = {},
) {
  const { duration, ...rest } = options;
  const argv = [
    'collect',
    '--pid',
    '1',
    '--duration',
    String(duration ?? 1),
    '--symbols',
    'none',
    '--output',
    scene.out,
  ];
  const perfmap = extra.includes('--perfmap') ? [] : ['--perfmap', 'off'];
  return inSidecar(target, scene, [process.execPath, cliPath, ...argv, ...perfmap, ...extra], rest);
}

export interface MarkerScan {
  /** Files (relative to the folder) whose bytes hold the marker; a gzip file is searched decompressed. */
  hits: string[];
  /** Symbolic links found, `path -> target`. */
  links: string[];
}

async function streamHolds(path: string, needle: Buffer, gzip: boolean): Promise<boolean> {
  let carry = Buffer.alloc(0);
  const input = createReadStream(path);
  const stream = gzip ? input.pipe(createGunzip()) : input;
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      const window = Buffer.concat([carry, chunk]);
      if (window.includes(needle)) return true;
      carry = window.subarray(Math.max(0, window.length - needle.length + 1));
    }
    return false;
  } finally {
    input.destroy();
    stream.destroy();
  }
}

/** Searches every regular file under `dir` (links not followed, gzip decompressed) for `marker`. */
export async function scanForMarker(dir: string, marker: string): Promise<MarkerScan> {
  const needle = Buffer.from(marker);
  const scan: MarkerScan = { hits: [], links: [] };
  const walk = async (folder: string): Promise<void> => {
    for (const name of (await readdir(folder)).sort()) {
      const path = join(folder, name);
      const info = await lstat(path);
      const rel = relative(dir, path);
      if (info.isSymbolicLink()) scan.links.push(`${rel} -> ${await readlink(path)}`);
      else if (info.isDirectory()) await walk(path);
      else if (info.isFile()) {
        if (await streamHolds(path, needle, false)) scan.hits.push(rel);
        else if (/\.gz$/.test(name) && (await streamHolds(path, needle, true).catch(() => false)))
          scan.hits.push(`${rel} (decompressed)`);
      }
    }
  };
  await walk(dir);
  return scan;
}

/** The names in `dir` other than the output folder, and the secret's content: nothing else may appear or change. */
export async function outsideState(scene: HostileScene): Promise<{ names: string[]; secret: string }> {
  const names = (await readdir(scene.dir)).filter((n) => n !== 'out').sort();
  return { names, secret: await readFile(scene.secret, 'utf8') };
}

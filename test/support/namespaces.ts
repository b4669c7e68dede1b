// The sidecar scenario without a container engine (FACTS.md §6), for tests that profile across namespaces:
// - `startNamespacedTarget(cmd, args)`: the target in its own PID and mount namespace with a private tmpfs /tmp
//   (its perf map exists only there); gives its PID here (hostPid), in its namespace (nsPid, 1), and kill().
// - `startInSidecar(hostPid, cmd, args)` / `runCliInSidecar(hostPid, argv)`: a command in its own mount namespace
//   with a different tmpfs /tmp, joined to the target's PID namespace, with its own /proc mounted; so it sees the
//   target as PID 1 and reaches the target's files only through /proc/1/root. Its working directory must exist
//   outside /tmp (the sidecar's /tmp is empty), e.g. under /var/tmp.
// Needs root, unshare and nsenter (util-linux): check with `needRoot(t)` and `needCommand(t, 'unshare')`.
import { spawn, type ChildProcess } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { execa } from 'execa';
import { cliPath, repoRoot } from './cli.js';

/**
 * Shell text that mounts a fresh tmpfs on /tmp (in a private mount namespace) while the repository stays reachable
 * at its own path when it lives under /tmp (CI may clone it there): it is bound aside first, then moved back.
 */
function privateTmp(): string {
  const keep = repoRoot.replace(/\/$/, '');
  if (!keep.startsWith('/tmp/')) return 'mount -t tmpfs tmpfs /tmp';
  const aside = `/run/profcpu-keep-$$`;
  return [
    `mkdir -p ${aside}`,
    `mount --bind '${keep}' ${aside}`,
    'mount -t tmpfs tmpfs /tmp',
    `mkdir -p '${keep}'`,
    `mount --move ${aside} '${keep}'`,
    `rmdir ${aside}`,
  ].join(' && ');
}

export interface NamespacedTarget {
  /** The target's PID in the test's namespace. */
  readonly hostPid: number;
  /** The target's PID in its own namespace (1: it is the namespace's init). */
  readonly nsPid: number;
  /** The `unshare` process holding the namespaces. */
  readonly wrapper: ChildProcess;
  /** Resolves when the target has exited. */
  readonly exited: Promise<void>;
  /** SIGKILLs the target (`unshare --fork` ignores SIGTERM; killing the namespace's init ends everything in it). */
  kill(): Promise<void>;
}

export interface NamespacedTargetOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Resolves true once the target is ready (e.g. its perf map exists); polled every 50 ms. Default: at once. */
  ready?: (target: { hostPid: number; nsPid: number }) => Promise<boolean>;
  /** Default 15 s. */
  readyTimeoutMs?: number;
}

async function childPid(parent: number): Promise<number | undefined> {
  const text = await readFile(`/proc/${parent}/task/${parent}/children`, 'utf8').catch(() => '');
  const first = text.trim().split(/\s+/)[0];
  return first ? Number(first) : undefined;
}

async function nsPidOf(pid: number): Promise<number | undefined> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => undefined);
  const nspids = /^NSpid:\s+(.*)$/m
    .exec(status ?? '')?.[1]
    ?.trim()
    .split(/\s+/);
  return nspids ? Number(nspids.at(-1)) : undefined;
}

/** Starts `command args` as PID 1 of a new PID + mount namespace, with a tmpfs on /tmp. */
export async function startNamespacedTarget(
  command: string,
  args: readonly string[],
  options: NamespacedTargetOptions = {},
): Promise<NamespacedTarget> {
  const wrapper = spawn(
    'unshare',
    [
      '--pid',
      '--fork',
      '--mount-proc',
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `${privateTmp()} && exec "$0" "$@"`,
      command,
      ...args,
    ],
    { cwd: options.cwd, env: options.env ?? process.env, stdio: 'ignore' },
  );
  const exited = new Promise<void>((resolve) => wrapper.once('exit', () => resolve()));
  const deadline = Date.now() + (options.readyTimeoutMs ?? 15_000);
  let hostPid: number | undefined;
  let nsPid: number | undefined;
  const kill = async () => {
    if (wrapper.exitCode === null && wrapper.signalCode === null) {
      try {
        if (hostPid !== undefined) process.kill(hostPid, 'SIGKILL');
        else wrapper.kill('SIGKILL');
      } catch (error) {
        // Already gone: the wrapper is about to exit too.
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
    await exited;
  };
  for (;;) {
    if (Date.now() > deadline || wrapper.exitCode !== null) {
      await kill().catch(() => {});
      throw new Error(`startNamespacedTarget: ${command} did not become ready`);
    }
    hostPid ??= await childPid(wrapper.pid!);
    // Ready once the shell has exec'd the command (its argv[0] is no longer sh) and the caller's check passes.
    if (hostPid !== undefined) {
      const cmdline = await readFile(`/proc/${hostPid}/cmdline`, 'utf8').catch(() => '');
      if (cmdline.split('\0')[0] !== 'sh') {
        nsPid ??= await nsPidOf(hostPid);
        if (nsPid !== undefined && (!options.ready || (await options.ready({ hostPid, nsPid })))) break;
      }
    }
    await sleep(50);
  }
  return { hostPid, nsPid, wrapper, exited, kill };
}

function sidecarArgv(hostPid: number, command: string, args: readonly string[]): string[] {
  const inner = 'mount -t proc proc /proc && exec "$0" "$@"';
  const outer = `target=$1; shift; ${privateTmp()} && exec nsenter --target "$target" --pid -- sh -c '${inner}' "$@"`;
  return ['--mount', '--propagation', 'private', 'sh', '-c', outer, 'sidecar', String(hostPid), command, ...args];
}

/** Starts `command args` in a sidecar of the target whose host PID is given (see the top of this file). */
export interface SidecarOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  timeout?: number;
  maxBuffer?: number;
}

export function startInSidecar(
  hostPid: number,
  command: string,
  args: readonly string[],
  options: SidecarOptions = {},
) {
  return execa('unshare', sidecarArgv(hostPid, command, args), { reject: false, all: true, ...options });
}

/** Runs the built CLI (dist/cli/main.js) in a sidecar of the target. */
export function runCliInSidecar(hostPid: number, argv: readonly string[], options: SidecarOptions = {}) {
  return startInSidecar(hostPid, process.execPath, [cliPath, ...argv], options);
}

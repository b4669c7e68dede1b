// A fake procfs root for one process: /PID/{status,stat,environ,fd/,root -> a fake container root}, so the socket
// lookup and perf-map decisions can be tested on layouts this machine does not have (namespaced pids, $TMPDIR,
// stale sockets).
import { once } from 'node:events';
import { lutimes, mkdir, mkdtemp, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeProcess {
  pid: number;
  nspid: number;
  startTicks: number;
  environment?: Record<string, string>;
}

export interface FakeProc {
  procRoot: string;
  /** The target's own filesystem, as /proc/PID/root shows it. */
  targetRoot: string;
  /** Creates an empty file in the target's filesystem, optionally with an mtime (seconds since the epoch). */
  touch(pathInTarget: string, mtimeSeconds?: number): Promise<string>;
  /** Creates a unix socket file (nobody listening) in the target's filesystem, optionally with an mtime. */
  socket(pathInTarget: string, mtimeSeconds?: number): Promise<string>;
  /** Adds /proc/PID/fd/N pointing at `target`. */
  openFd(fd: number, target: string): Promise<void>;
  cleanup(): Promise<void>;
}

export async function makeFakeProc(p: FakeProcess): Promise<FakeProc> {
  const base = await mkdtemp(join(tmpdir(), 'profcpu-fakeproc-'));
  const procRoot = join(base, 'proc');
  const targetRoot = join(base, 'target');
  const dir = join(procRoot, String(p.pid));
  await mkdir(join(dir, 'fd'), { recursive: true });
  await mkdir(join(targetRoot, 'tmp'), { recursive: true });
  await writeFile(join(dir, 'status'), `Name:\tmy app\nPid:\t${p.pid}\nNSpid:\t${p.pid}\t${p.nspid}\nPPid:\t1\n`);
  const fields = Array.from({ length: 50 }, () => '0');
  fields[0] = 'S';
  fields[19] = String(p.startTicks); // field 22
  await writeFile(join(dir, 'stat'), `${p.pid} (my app) ${fields.join(' ')}\n`);
  const env = Object.entries(p.environment ?? {}).map(([k, v]) => `${k}=${v}\0`);
  await writeFile(join(dir, 'environ'), env.join(''));
  await symlink(targetRoot, join(dir, 'root'));
  return {
    procRoot,
    targetRoot,
    touch: async (path, mtime) => {
      const full = join(targetRoot, path);
      await mkdir(join(full, '..'), { recursive: true });
      await writeFile(full, '');
      if (mtime !== undefined) await utimes(full, mtime, mtime);
      return full;
    },
    socket: async (path, mtime) => {
      const full = join(targetRoot, path);
      await mkdir(join(full, '..'), { recursive: true });
      await makeSocketFile(join(base, `s-${Math.random().toString(36).slice(2)}`), full);
      if (mtime !== undefined) await lutimes(full, mtime, mtime);
      return full;
    },
    openFd: (fd, target) => symlink(target, join(dir, 'fd', String(fd))),
    cleanup: () => rm(base, { recursive: true, force: true }),
  };
}

/**
 * A socket file left behind with nobody listening, like a runtime's after it exits. Node unlinks a socket when its
 * server closes, so the socket is moved to its place before the server is closed.
 */
export async function makeSocketFile(scratch: string, path: string): Promise<void> {
  const server = createServer().listen(scratch);
  await once(server, 'listening');
  await rename(scratch, path);
  server.close();
  await once(server, 'close');
}

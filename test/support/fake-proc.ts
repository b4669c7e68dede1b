// A procfs tree on disk for tests: processes with the files profcpu reads (status, stat, cmdline, environ, maps,
// fd/) and a `root` folder standing for /proc/PID/root, so discovery, snapshots, socket lookup and perf-map decisions
// run against known processes, on layouts this machine does not have (namespaced pids, $TMPDIR, stale sockets).
// `FakeProc` builds the tree; `fakeProcessView` is one process of it with helpers for files in its root.
import { once } from 'node:events';
import { lutimes, mkdir, mkdtemp, readFile, rename, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeProcess {
  pid: number;
  nspid?: number;
  comm?: string;
  cmdline?: string[];
  env?: Record<string, string>;
  maps?: string;
  uid?: number;
  /** Files inside the process's root, path → content (e.g. `/tmp/perf-1.map`). */
  files?: Record<string, string>;
  startTicks?: number;
}

export const coreclrMaps = [
  '7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 /usr/share/dotnet/shared/Microsoft.NETCore.App/8.0.11/libcoreclr.so',
  '7f0000200000-7f0000300000 rwxp 00000000 00:00 0 ',
  '7f0000400000-7f0000500000 r-xs 00000000 00:01 99 /memfd:doublemapper (deleted)',
].join('\n');

export class FakeProc {
  private constructor(readonly root: string) {}

  static async create(): Promise<FakeProc> {
    return new FakeProc(await mkdtemp(join(tmpdir(), 'profcpu-fake-proc-')));
  }

  async add(p: FakeProcess): Promise<void> {
    const dir = join(this.root, String(p.pid));
    await mkdir(join(dir, 'root', 'tmp'), { recursive: true });
    await mkdir(join(dir, 'fd'), { recursive: true });
    const uid = p.uid ?? 0;
    const comm = p.comm ?? 'my app';
    await writeFile(
      join(dir, 'status'),
      `Name:\t${comm}\nState:\tS (sleeping)\nPPid:\t0\nUid:\t${uid}\t${uid}\t${uid}\t${uid}\nNSpid:\t${p.pid}${p.nspid === undefined ? '' : `\t${p.nspid}`}\nThreads:\t3\nCapEff:\t0000000000000000\nSeccomp:\t0\n`,
    );
    const fields = Array.from({ length: 50 }, () => '0');
    fields[19] = String(p.startTicks ?? 1000); // field 22 is the 20th after "pid (comm)"
    await writeFile(join(dir, 'stat'), `${p.pid} (${comm}) S ${fields.slice(1).join(' ')}\n`);
    await writeFile(join(dir, 'cmdline'), (p.cmdline ?? []).map((a) => `${a}\0`).join(''));
    await writeFile(
      join(dir, 'environ'),
      Object.entries(p.env ?? {})
        .map(([k, v]) => `${k}=${v}\0`)
        .join(''),
    );
    await writeFile(join(dir, 'maps'), p.maps ?? '');
    // The mounts its root lies on are ours (the tree is a folder here): lookups are refused on a mount not listed.
    await writeFile(join(dir, 'mountinfo'), await readFile('/proc/self/mountinfo'));
    for (const [path, content] of Object.entries(p.files ?? {})) await this.writeInRoot(p.pid, path, content);
  }

  /** The folder standing for /proc/PID/root. */
  rootOf(pid: number): string {
    return join(this.root, String(pid), 'root');
  }

  /** Writes a file inside a process's root. */
  async writeInRoot(pid: number, path: string, content: string): Promise<string> {
    const full = join(this.rootOf(pid), path);
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, content);
    return full;
  }

  /** Makes `self` point at a process, as /proc/self does. */
  async setSelf(pid: number): Promise<void> {
    await symlink(String(pid), join(this.root, 'self'));
  }

  /** Removes a process, as if it exited. */
  async remove(pid: number): Promise<void> {
    await rm(join(this.root, String(pid)), { recursive: true, force: true });
  }

  async dispose(): Promise<void> {
    await rm(this.root, { recursive: true, force: true });
  }
}

/** One process of a fake procfs, for tests that look at a single target. */
export interface FakeProcessView {
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

/** A fake procfs holding the one process `p`. */
export async function fakeProcessView(p: FakeProcess): Promise<FakeProcessView> {
  const proc = await FakeProc.create();
  await proc.add(p);
  const targetRoot = proc.rootOf(p.pid);
  return {
    procRoot: proc.root,
    targetRoot,
    touch: async (path, mtime) => {
      const full = await proc.writeInRoot(p.pid, path, '');
      if (mtime !== undefined) await utimes(full, mtime, mtime);
      return full;
    },
    socket: async (path, mtime) => {
      const full = join(targetRoot, path);
      await mkdir(join(full, '..'), { recursive: true });
      await makeSocketFile(join(proc.root, `s-${Math.random().toString(36).slice(2)}`), full);
      if (mtime !== undefined) await lutimes(full, mtime, mtime);
      return full;
    },
    openFd: (fd, target) => symlink(target, join(proc.root, String(p.pid), 'fd', String(fd))),
    cleanup: () => proc.dispose(),
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

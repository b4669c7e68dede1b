// A procfs tree on disk for tests: processes with the files profcpu reads (status, stat, cmdline, environ, maps) and
// a `root` folder standing for /proc/PID/root, so discovery and snapshots run against known processes.
import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface FakeProcess {
  pid: number;
  nspid?: number;
  comm: string;
  cmdline: string[];
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
    await mkdir(join(dir, 'root'), { recursive: true });
    const uid = p.uid ?? 0;
    await writeFile(
      join(dir, 'status'),
      `Name:\t${p.comm}\nState:\tS (sleeping)\nPPid:\t0\nUid:\t${uid}\t${uid}\t${uid}\t${uid}\nNSpid:\t${p.pid}${p.nspid === undefined ? '' : `\t${p.nspid}`}\nThreads:\t3\nCapEff:\t0000000000000000\nSeccomp:\t0\n`,
    );
    const fields = Array.from({ length: 50 }, () => '0');
    fields[19] = String(p.startTicks ?? 1000); // field 22 is the 20th after "pid (comm)"
    await writeFile(join(dir, 'stat'), `${p.pid} (${p.comm}) S ${fields.slice(1).join(' ')}\n`);
    await writeFile(join(dir, 'cmdline'), p.cmdline.map((a) => `${a}\0`).join(''));
    await writeFile(
      join(dir, 'environ'),
      Object.entries(p.env ?? {})
        .map(([k, v]) => `${k}=${v}\0`)
        .join(''),
    );
    await writeFile(join(dir, 'maps'), p.maps ?? '');
    for (const [path, content] of Object.entries(p.files ?? {})) await this.writeInRoot(p.pid, path, content);
  }

  /** Writes a file inside a process's root. */
  async writeInRoot(pid: number, path: string, content: string): Promise<void> {
    const full = join(this.root, String(pid), 'root', path);
    await mkdir(join(full, '..'), { recursive: true });
    await writeFile(full, content);
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

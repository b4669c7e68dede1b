// Which file system a path of the target lies on, from the target's /proc/PID/mountinfo alone (no system call reaches
// the file system itself). profcpu refuses to read files on a FUSE or network file system the target can see: their
// server (possibly the target) can leave a read, an open or even a close waiting for ever, in a thread profcpu cannot
// take back. The mount at the target's root is the exception: the container runtime made it (fuse-overlayfs for
// rootless podman, virtiofs or 9p for VM sandboxes and Docker Desktop), not the target, and refusing it would refuse
// the whole target; FUSE and network mounts below it stay refused. mountinfo: `id parent major:minor root mountpoint options [optional...] - fstype source superoptions`,
// mount points relative to the process's root, with space, tab, newline and backslash written as octal escapes.
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import { isExecutable, parseProcMaps } from './proc-maps.js';
import { listPids, readProcCapped, readProcText, type ProcfsOptions } from './procfs.js';

/** File systems whose reads another process serves or a network carries: a read may never return. */
const stallingTypes = /^(fuse(\..*)?|fuseblk|nfs4?|cifs|smb3|smbfs|9p|ceph|glusterfs|afs|virtiofs|sshfs|davfs)$/;

export interface Mount {
  /** Its mount id (the first field), as /proc/PID/fdinfo's `mnt_id` names it: the same in every mount namespace. */
  id: string;
  /** Where it is mounted, as the target sees its own root. */
  mountPoint: string;
  fsType: string;
  /** `major:minor` of its device, decimal as mountinfo prints it. */
  device: string;
}

/** The mounts of a mountinfo text, bounded by the text (whose read is capped). Lines that do not parse are skipped. */
export function parseMountInfo(text: string): Mount[] {
  const mounts: Mount[] = [];
  for (const line of text.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const fields = line.slice(0, dash).split(' ');
    const fsType = line.slice(dash + 3).split(' ')[0];
    if (fields.length < 6 || !fields[4]?.startsWith('/') || !fsType) continue;
    mounts.push({ id: fields[0]!, mountPoint: unescape(fields[4]), fsType: unescape(fsType), device: fields[2]! });
  }
  return mounts;
}

function unescape(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
}

/**
 * The mount the target's root lies on, as the container runtime made it: the first at `/` (a mount stacked on it
 * later is the target's own).
 */
export function rootMountOf(mounts: readonly Mount[]): Mount | undefined {
  return mounts.find((mount) => mount.mountPoint === '/');
}

/** The mount a path lies on: the last one mounted at its longest mount-point prefix. */
export function mountOf(mounts: readonly Mount[], path: string): Mount | undefined {
  const normal = posix.normalize(`/${path}`);
  let found: Mount | undefined;
  for (const mount of mounts) {
    const point = mount.mountPoint;
    const under = point === '/' || normal === point || normal.startsWith(`${point}/`);
    if (under && (!found || point.length >= found.mountPoint.length)) found = mount;
  }
  return found;
}

/**
 * The type of the FUSE or network file system `path` lies on in the target's view, or undefined when it is on a
 * local one or on the target's root mount (or the target's mounts cannot be read: the lookups that follow refuse
 * what mountCheckOfFd cannot check).
 */
export async function stallingFileSystemAt(
  pid: number,
  path: string,
  options: ProcfsOptions = {},
): Promise<string | undefined> {
  return (await stallingFileSystems(pid, options))(path);
}

/** stallingFileSystemAt for several paths, the target's mountinfo read once. */
export async function stallingFileSystems(
  pid: number,
  options: ProcfsOptions = {},
): Promise<(path: string) => string | undefined> {
  const text = await readProcText(pid, 'mountinfo', options).catch(() => undefined);
  const mounts = parseMountInfo(text ?? '');
  const root = rootMountOf(mounts);
  return (path) => {
    const mount = mountOf(mounts, path);
    return mount && mount !== root && stallingTypes.test(mount.fsType) ? mount.fsType : undefined;
  };
}

/**
 * For a tree opened under /proc/PID/root (src/files/rooted.ts): why nothing may be looked up through an O_PATH fd of
 * ours, or undefined when its mount is known to be local, from its mount id (/proc/self/fdinfo) and the target's
 * mountinfo; nothing reaches the file system itself. Fails closed: a mount the target's mountinfo does not list as
 * local, a mountinfo cut at its cap or unreadable, an fdinfo without a mount id, all refuse.
 *
 * The mountinfo is read again at every mount crossing (an fd whose mount is not its parent's), after the fd was
 * opened: the fd pins its mount, so its id names that mount and no other while the check runs (ids are reused once
 * a mount is gone), and a mount made since an earlier read is seen. An fd on its parent's mount is on a mount already
 * allowed (the parent's fd pins it).
 *
 * The mount the target's root lies on (`parent` undefined: the tree's root, opened through /proc/PID/root) is
 * allowed whatever its type: the container runtime made it, not the target (see the top of this file). FUSE and
 * network mounts below it stay refused.
 */
export function mountCheckOfFd(
  pid: number,
  options: ProcfsOptions = {},
): (fd: number, parent: number | undefined) => Promise<string | undefined> {
  const unsure = '(refused: it could be a FUSE or network file system, whose server may never answer)';
  let rootMount: string | undefined;
  return async (fd, parent) => {
    const id = await mountIdOf(fd);
    if (id === undefined) return `on a mount that cannot be told (no mount id in its fdinfo) ${unsure}`;
    if (parent === undefined) {
      // The tree's root fd pins this mount for as long as the tree is open.
      rootMount = id;
      return undefined;
    }
    if (id === rootMount || id === (await mountIdOf(parent))) return undefined;
    const read = await readProcCapped(pid, 'mountinfo', options).catch(() => undefined);
    if (!read) return `on a mount that cannot be checked (the target’s mountinfo cannot be read) ${unsure}`;
    // A text cut at its cap ends in part of a line, whose file system type may be cut too (`fu` of `fuse`).
    const text = read.truncated ? read.text.slice(0, read.text.lastIndexOf('\n') + 1) : read.text;
    const mount = parseMountInfo(text).find((m) => m.id === id);
    if (mount)
      return stallingTypes.test(mount.fsType)
        ? `on a ${mount.fsType} file system (refused: its server may never answer)`
        : undefined;
    return read.truncated
      ? `on a mount that cannot be checked (the target’s mountinfo is longer than profcpu reads) ${unsure}`
      : `on a mount the target’s mountinfo does not list ${unsure}`;
  };
}

/** The mount id of one of our own fds, from our own /proc (whatever procfs the target's files are read from). */
async function mountIdOf(fd: number): Promise<string | undefined> {
  // A few lines.
  const info = await readFile(`/proc/self/fdinfo/${fd}`, 'utf8');
  return /^mnt_id:\s*(\d+)$/m.exec(info)?.[1];
}

export interface StallingMapping {
  /** The mapped file, as /proc/PID/maps prints it. */
  path: string;
  fsType: string;
  /** Mapped executable somewhere in the process (by path): perf reads the build-ids of those even without stack copies. */
  executable: boolean;
  /** The process mapping it, when another than the target (stallingMappingsOfEvery). */
  pid?: number;
}

/**
 * The files a process maps from a FUSE or network file system, each once, found by the device number /proc/PID/maps
 * gives (hex) in mountinfo (decimal): no path is resolved, so a file mapped from another mount namespace or under a
 * name that lies is still placed. perf record reads these when it starts (their build-ids); a file whose server stops
 * answering then holds perf in the kernel for good. Files on the target's root mount are not counted (the runtime's,
 * see the top of this file). Undefined when the mountinfo lists no mount (it always lists the
 * root): the caller cannot tell.
 */
export function stallingMappings(mapsText: string, mountInfoText: string): StallingMapping[] | undefined {
  const mounts = parseMountInfo(mountInfoText);
  if (mounts.length === 0) return undefined;
  const root = rootMountOf(mounts);
  const stalling = new Map<string, string>();
  for (const mount of mounts)
    if (stallingTypes.test(mount.fsType) && mount.device !== root?.device) stalling.set(mount.device, mount.fsType);
  const mappings = parseProcMaps(mapsText).mappings;
  // By path: a path also mapped executable from elsewhere counts, on the side of -B.
  const executable = new Set(mappings.filter(isExecutable).map((m) => m.path));
  const found = new Map<string, StallingMapping>();
  for (const mapping of mappings) {
    const [major, minor] = mapping.dev.split(':').map((part) => parseInt(part, 16));
    const fsType = stalling.get(`${major}:${minor}`);
    if (fsType && mapping.inode !== 0 && !found.has(mapping.path))
      found.set(mapping.path, { path: mapping.path, fsType, executable: executable.has(mapping.path) });
  }
  return [...found.values()];
}

/**
 * stallingMappings of a live process, from its /proc entries (bounded reads); undefined when either cannot be read
 * whole (gone, unreadable, or cut at its cap: a mount or a mapping past the cut would be missed).
 */
export async function stallingMappingsOf(
  pid: number,
  options: ProcfsOptions = {},
): Promise<StallingMapping[] | undefined> {
  const [maps, mountInfo] = await Promise.all([
    readProcCapped(pid, 'maps', options).catch(() => undefined),
    readProcCapped(pid, 'mountinfo', options).catch(() => undefined),
  ]);
  if (!maps || !mountInfo || maps.truncated || mountInfo.truncated) return undefined;
  return stallingMappings(maps.text, mountInfo.text);
}

/**
 * The files the target maps executable from a FUSE or network file system. perf reads the build-ids of executable
 * mappings only (without stack copies), so a data file there (an mmapped database on NFS, fonts on virtiofs) does not
 * make perf record without build-ids (-B), which would cost every frame its build-id.
 */
export async function stallingExecutables(pid: number, options: ProcfsOptions): Promise<StallingMapping[] | undefined> {
  return (await stallingMappingsOf(pid, options))?.filter((m) => m.executable);
}

/** Processes looked at by stallingMappingsOfEvery at most: past them it cannot tell. */
const maxProcesses = 8192;

/**
 * The stalling mappings of every process this procfs shows: perf recording every CPU (-a,
 * the cgroup scope) synthesizes the mappings of every process it sees, and reads their build-ids. A process gone
 * meanwhile, or whose maps are closed to us (and so to perf), is passed over; undefined when one cannot be read whole
 * or there are too many: the caller cannot tell.
 */
export async function stallingMappingsOfEvery(options: ProcfsOptions = {}): Promise<StallingMapping[] | undefined> {
  const pids = await listPids(options).catch(() => undefined);
  if (!pids || pids.length > maxProcesses) return undefined;
  const found: StallingMapping[] = [];
  // Gone meanwhile (undefined), or its maps closed to us (a process that is not dumpable): perf, reading as we do,
  // reads none of its files either. Any other failure (null): cannot tell.
  const read = (pid: number, name: string) =>
    readProcCapped(pid, name, options).catch((error: unknown) => (closed(error) ? undefined : null));
  for (const pid of pids) {
    const maps = await read(pid, 'maps');
    if (maps === undefined) continue;
    if (maps === null || maps.truncated) return undefined;
    // Nothing mapped (a kernel thread, a zombie, whose mountinfo cannot even be read).
    if (maps.text === '') continue;
    const mountInfo = await read(pid, 'mountinfo');
    if (mountInfo === undefined) continue;
    if (mountInfo === null || mountInfo.truncated) return undefined;
    const stalling = stallingMappings(maps.text, mountInfo.text);
    if (!stalling) return undefined;
    for (const mapping of stalling) found.push({ ...mapping, pid });
  }
  return found;
}

function closed(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'EACCES' || code === 'EPERM';
}

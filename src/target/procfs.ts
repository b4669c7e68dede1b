// Reading one process through procfs: the text of /proc/PID/{status,stat,cmdline,environ} in, plain values out.
// The parsers are pure; the readers take a `procRoot` (default `/proc`) so tests and sidecars can point elsewhere.
// A process may vanish between two reads: readers turn ENOENT/ESRCH into `undefined` and let the caller decide.
import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { readPathCapped } from '../files/bounded-read.js';

export interface ProcfsOptions {
  /** Where procfs is mounted. Default `/proc`. */
  procRoot?: string;
}

export const procfsDefaults = Object.freeze({ procRoot: '/proc' });

export interface ProcStatus {
  /** `Name:`, the kernel's comm (15 bytes at most). */
  name: string;
  /** `NSpid:` from the outermost namespace (ours) to the innermost (the process's own). */
  nspids: number[];
  ppid: number;
  /** Real and effective uid. */
  uid: { real: number; effective: number };
  /** Effective capability set (`CapEff:`) as a bit mask. */
  capEff: bigint;
  /** `Seccomp:` 0 none, 1 strict, 2 filter. */
  seccomp: number;
  /** Threads (`Threads:`). */
  threads: number;
}

/** Parses /proc/PID/status text. Unknown or missing fields get neutral values. */
export function parseStatus(text: string): ProcStatus {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  const numbers = (key: string): number[] =>
    (fields.get(key) ?? '')
      .split(/\s+/)
      .filter((s) => /^\d+$/.test(s))
      .map(Number);
  const uids = numbers('Uid');
  const capHex = fields.get('CapEff') ?? '0';
  return {
    name: fields.get('Name') ?? '',
    nspids: numbers('NSpid'),
    ppid: numbers('PPid')[0] ?? 0,
    uid: { real: uids[0] ?? -1, effective: uids[1] ?? -1 },
    capEff: /^[0-9a-fA-F]+$/.test(capHex) ? BigInt(`0x${capHex}`) : 0n,
    seccomp: numbers('Seccomp')[0] ?? 0,
    threads: numbers('Threads')[0] ?? 0,
  };
}

export interface ProcStat {
  /** One-letter state: R, S, D, Z... */
  state: string;
  /** Start time after boot in clock ticks (field 22): also the key of .NET's diagnostic socket name. */
  startTicks: number;
  /** User and system CPU time in clock ticks (fields 14 and 15). */
  utimeTicks: number;
  stimeTicks: number;
}

/** Parses /proc/PID/stat. The comm field may hold spaces and parentheses, so fields are counted after the last ')'. */
export function parseStat(text: string): ProcStat | undefined {
  const close = text.lastIndexOf(')');
  if (close < 0) return undefined;
  // After ')' come fields 3 (state) onwards.
  const rest = text
    .slice(close + 1)
    .trim()
    .split(/\s+/);
  const field = (n: number): number => Number(rest[n - 3] ?? NaN);
  const stat = {
    state: rest[0] ?? '?',
    startTicks: field(22),
    utimeTicks: field(14),
    stimeTicks: field(15),
  };
  return Number.isFinite(stat.startTicks) ? stat : undefined;
}

/** Splits NUL-separated text (/proc/PID/cmdline, environ) into its strings. */
export function parseNulList(text: string): string[] {
  const parts = text.split('\0');
  if (parts.at(-1) === '') parts.pop();
  return parts;
}

/** Turns environ strings into a map; later duplicates win, as getenv would not guarantee either. */
export function parseEnviron(entries: readonly string[]): Map<string, string> {
  const env = new Map<string, string>();
  for (const entry of entries) {
    const eq = entry.indexOf('=');
    if (eq > 0) env.set(entry.slice(0, eq), entry.slice(eq + 1));
  }
  return env;
}

/** `/proc/PID/<name>` under the given procfs root. */
export function procPath(pid: number, name: string, options: ProcfsOptions = {}): string {
  return join(options.procRoot ?? procfsDefaults.procRoot, String(pid), name);
}

/** A path inside the process's own mount namespace, reached through /proc/PID/root. */
export function pathInTarget(pid: number, path: string, options: ProcfsOptions = {}): string {
  return join(procPath(pid, 'root', options), path);
}

function isGone(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ESRCH';
}

/**
 * Bytes read at most from each /proc/PID file: the target decides their length (its environment, its mappings' file
 * names), so each has a cap well above what a real process needs. `maps` of a process with the kernel's default
 * 65 530 mappings and long paths stays under it.
 */
export const procTextLimits: Readonly<Record<string, number>> = Object.freeze({
  maps: 64 << 20,
  environ: 4 << 20,
  cmdline: 4 << 20,
  // About 300 bytes (52 numbers and a comm of 15 at most); read every second per process by `profcpu watch`, where a
  // 1 MiB buffer a read cost it more in garbage collection than everything else it does while idle.
  stat: 4 << 10,
  // A line per mount (about 100 bytes, up to a few KiB with long paths): 16 MiB holds far more mounts than a container
  // has. Its readers refuse what they cannot check when it is cut (src/target/mounts.ts).
  mountinfo: 16 << 20,
  default: 1 << 20,
});

/** Time allowed for one /proc/PID read: reading maps waits for the target's mmap lock. */
export const procReadTimeoutMs = 10_000;

/**
 * Reads /proc/PID/<name> as text, up to its cap in procTextLimits (the rest is dropped); undefined when the process
 * (or the file) is gone. Other errors propagate.
 */
export async function readProcText(
  pid: number,
  name: string,
  options: ProcfsOptions = {},
): Promise<string | undefined> {
  return (await readProcCapped(pid, name, options))?.text;
}

/** readProcText, also saying whether the text was cut at its cap (for readers that must not act on part of it). */
export async function readProcCapped(
  pid: number,
  name: string,
  options: ProcfsOptions = {},
): Promise<{ text: string; truncated: boolean } | undefined> {
  try {
    const maxBytes = procTextLimits[name] ?? procTextLimits['default']!;
    const { bytes, truncated } = await readPathCapped(procPath(pid, name, options), {
      maxBytes,
      timeoutMs: procReadTimeoutMs,
    });
    return { text: bytes.toString('utf8'), truncated };
  } catch (error) {
    if (isGone(error)) return undefined;
    throw error;
  }
}

export async function readStatus(pid: number, options: ProcfsOptions = {}): Promise<ProcStatus | undefined> {
  const text = await readProcText(pid, 'status', options);
  return text === undefined ? undefined : parseStatus(text);
}

export async function readStat(pid: number, options: ProcfsOptions = {}): Promise<ProcStat | undefined> {
  const text = await readProcText(pid, 'stat', options);
  return text === undefined ? undefined : parseStat(text);
}

/** Our own status, through /proc/self. */
export async function readSelfStatus(options: ProcfsOptions = {}): Promise<ProcStatus | undefined> {
  const text = await readFile(join(options.procRoot ?? procfsDefaults.procRoot, 'self', 'status'), 'utf8').catch(
    () => undefined,
  );
  return text === undefined ? undefined : parseStatus(text);
}

/** Boot time (`btime` of /proc/stat), seconds since the epoch. */
export async function readBootTime(options: ProcfsOptions = {}): Promise<number | undefined> {
  const text = await readFile(join(options.procRoot ?? procfsDefaults.procRoot, 'stat'), 'utf8').catch(() => undefined);
  const match = text === undefined ? null : /^btime (\d+)$/m.exec(text);
  return match ? Number(match[1]) : undefined;
}

/** Clock ticks per second in /proc/PID/stat (USER_HZ): 100 on every Linux architecture profcpu runs on. */
export const clockTicksPerSecond = 100;

/**
 * When a process started, in ms since the epoch, from its start time in ticks after boot (/proc/PID/stat field 22);
 * undefined when the boot time cannot be read.
 */
export async function processStartMs(startTicks: number, options: ProcfsOptions = {}): Promise<number | undefined> {
  const boot = await readBootTime(options);
  return boot === undefined ? undefined : (boot + startTicks / clockTicksPerSecond) * 1000;
}

/** Process IDs listed under the procfs root, ascending. */
export async function listPids(options: ProcfsOptions = {}): Promise<number[]> {
  const names = await readdir(options.procRoot ?? procfsDefaults.procRoot);
  return names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .sort((a, b) => a - b);
}

/** Our own PID as the procfs at `procRoot` numbers it (in a sidecar with its own /proc, not `process.pid`). */
export async function ownPid(options: ProcfsOptions = {}): Promise<number | undefined> {
  const link = await readlink(join(options.procRoot ?? procfsDefaults.procRoot, 'self')).catch(() => undefined);
  return link !== undefined && /^\d+$/.test(link) ? Number(link) : undefined;
}

/** Capability bits profcpu cares about (linux/capability.h). */
export const capability = Object.freeze({ SYS_PTRACE: 19, SYS_ADMIN: 21, SYSLOG: 34, PERFMON: 38 });

export function hasCapability(capEff: bigint, bit: number): boolean {
  return ((capEff >> BigInt(bit)) & 1n) === 1n;
}

// Which process to profile: every visible process summarised (for `profcpu ps`), and the choice of one target from
// --pid, --name, or the default (the only .NET process visible, else PID 1) together with the reason, so the CLI can
// say which process was chosen and why. Throws NO_TARGET / TARGET_AMBIGUOUS with a remedy.
import { basename } from 'node:path';
import { ProfcpuError } from '../error.js';
import { inspectProcess, type TargetInfo } from './inspect.js';
import { listPids, ownPid, type ProcfsOptions } from './procfs.js';

/** Every visible user-space process, inspected; processes that vanish or cannot be read are left out. */
export async function listProcesses(options: ProcfsOptions = {}): Promise<TargetInfo[]> {
  const infos = await Promise.all(
    (await listPids(options)).map((pid) => inspectProcess(pid, options).catch(() => undefined)),
  );
  // Kernel threads have an empty command line.
  return infos.filter((i): i is TargetInfo => i !== undefined && i.cmdline.length > 0);
}

/** True for a process whose JIT frames profcpu can name: .NET, or anything that writes a perf map. */
export function isWorthProfiling(info: TargetInfo): boolean {
  return info.runtime === 'dotnet' || info.perfMap.present;
}

/** The names a process answers to for --name: its comm, its executable's base name, and a .NET app's dll name. */
export function processNames(info: TargetInfo): string[] {
  const names = new Set<string>([info.comm]);
  const argv0 = info.cmdline[0];
  if (argv0) names.add(basename(argv0));
  // `dotnet Shop.dll`: only for .NET itself, so a wrapper (tini -- dotnet Shop.dll) does not answer to Shop.
  for (const arg of info.runtime === 'dotnet' ? info.cmdline.slice(1) : []) {
    const dll = /([^/]+)\.dll$/.exec(arg);
    if (dll) {
      names.add(dll[1]!);
      break;
    }
  }
  return [...names].filter((n) => n !== '');
}

export interface TargetQuery {
  pid?: number;
  name?: string;
}

export interface ChosenTarget {
  target: TargetInfo;
  /** One sentence saying why this process was chosen. */
  reason: string;
}

function describe(info: TargetInfo): string {
  return `${info.pid} (${info.cmdline.join(' ').slice(0, 80)})`;
}

/** Picks the process to profile. */
export async function chooseTarget(query: TargetQuery, options: ProcfsOptions = {}): Promise<ChosenTarget> {
  if (query.pid !== undefined) {
    return { target: await inspectProcess(query.pid, options), reason: `PID ${query.pid} was given` };
  }
  const self = await ownPid(options);
  const others = (await listProcesses(options)).filter((p) => p.pid !== self);
  if (query.name !== undefined) {
    const name = query.name;
    const matches = others.filter((p) => processNames(p).includes(name));
    if (matches.length === 1) return { target: matches[0]!, reason: `it is the only process named "${name}"` };
    if (matches.length === 0)
      throw new ProfcpuError('NO_TARGET', `no visible process is named "${name}"`, {
        remedy: 'List candidates with `profcpu ps --all` and pass --pid, or a name from its COMMAND column.',
      });
    throw ambiguous(`${matches.length} processes are named "${name}"`, matches);
  }
  const dotnet = others.filter((p) => p.runtime === 'dotnet');
  if (dotnet.length === 1) return { target: dotnet[0]!, reason: 'it is the only .NET process visible' };
  if (dotnet.length > 1) throw ambiguous(`${dotnet.length} .NET processes are visible`, dotnet);
  return {
    // Inspected again rather than looked up in the list, so an unreadable PID 1 fails with the precise reason.
    target: await inspectProcess(1, options),
    reason: 'no .NET process is visible, so PID 1 was chosen (pass --pid or --name to change it)',
  };
}

function ambiguous(what: string, matches: readonly TargetInfo[]): ProfcpuError {
  return new ProfcpuError('TARGET_AMBIGUOUS', `${what}: ${matches.map(describe).join('; ')}`, {
    remedy: 'Pass --pid with one of these PIDs.',
  });
}

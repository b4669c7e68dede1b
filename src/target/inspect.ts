// A PID in, what profcpu needs to know about that process out (TargetInfo): its PIDs in both namespaces, command
// line, runtime (.NET detected by libcoreclr.so in its maps, Node by its executable), the .NET settings that decide
// whether JIT frames can be named, and where its perf map and jitdump live, reached through /proc/PID/root so no
// shared /tmp is needed. Throws NO_TARGET / TARGET_NOT_VISIBLE with a remedy.
import { basename } from 'node:path';
import {
  ProcfsOptions,
  parseEnviron,
  parseNulList,
  pathInTarget,
  readProcText,
  readStat,
  readStatus,
} from './procfs.js';
import { parseProcMaps } from './proc-maps.js';
import { selfContainedVersion } from './self-contained.js';
import { stallingFileSystems } from './mounts.js';
import { TargetFiles, type TargetFileState } from './target-files.js';
import { ProfcpuError } from '../error.js';

export type Runtime = 'dotnet' | 'node' | 'other';

export interface DotnetInfo {
  /**
   * Runtime version from the libcoreclr.so path (`.../Microsoft.NETCore.App/10.0.0/libcoreclr.so`), or for a
   * self-contained app from the runtimeconfig.json beside it (src/target/self-contained.ts), if visible.
   */
  version?: string;
  /** Path of libcoreclr.so as the target sees it. */
  coreclrPath: string;
  /** `DOTNET_PerfMapEnabled` (or legacy `COMPlus_`), as set in the target's environment. */
  perfMapEnabled?: string;
  /** `DOTNET_EnableWriteXorExecute`; unset means W^X is on (the default since .NET 7). */
  writeXorExecute: boolean;
  /** `DOTNET_PerfMapJitDumpPath`, where the runtime writes its perf map and jitdump instead of /tmp. */
  perfMapDir?: string;
}

export interface FileInTarget extends TargetFileState {
  /** Path as the target sees it (`/tmp/perf-1.map`). */
  path: string;
  /** Where it would be reached from here (/proc/PID/root/...): for messages; reads go through TargetFiles. */
  hostPath: string;
}

export interface TargetInfo {
  /** PID as this process (and so perf) sees it. */
  pid: number;
  /** PID inside the target's own PID namespace: perf maps are named after it. */
  nspid: number;
  comm: string;
  cmdline: string[];
  uid: number;
  runtime: Runtime;
  dotnet?: DotnetInfo;
  /** Start time after boot, clock ticks (field 22 of /proc/PID/stat). */
  startTicks: number;
  perfMap: FileInTarget;
  jitDump: FileInTarget;
}

const envValue = (env: Map<string, string>, name: string): string | undefined =>
  env.get(`DOTNET_${name}`) ?? env.get(`COMPlus_${name}`);

/** Finds libcoreclr.so among mapped files; returns the .NET facts, or undefined for other processes. */
export function detectDotnet(mapsText: string, env: Map<string, string>): DotnetInfo | undefined {
  const coreclr = parseProcMaps(mapsText).mappings.find((m) => basename(m.path) === 'libcoreclr.so');
  if (!coreclr) return undefined;
  const version = /\/Microsoft\.NETCore\.App\/([^/]+)\/libcoreclr\.so$/.exec(coreclr.path)?.[1];
  const wxe = envValue(env, 'EnableWriteXorExecute');
  const info: DotnetInfo = { coreclrPath: coreclr.path, writeXorExecute: wxe !== '0' };
  if (version) info.version = version;
  const perfMap = envValue(env, 'PerfMapEnabled');
  if (perfMap !== undefined) info.perfMapEnabled = perfMap;
  const dir = envValue(env, 'PerfMapJitDumpPath');
  if (dir) info.perfMapDir = dir;
  return info;
}

function detectRuntime(comm: string, cmdline: readonly string[], dotnet: DotnetInfo | undefined): Runtime {
  if (dotnet) return 'dotnet';
  if (comm === 'node' || basename(cmdline[0] ?? '') === 'node') return 'node';
  return 'other';
}

/** The state of `paths` in the target and, for a self-contained .NET app, its runtime's version. */
async function readTargetFiles(
  pid: number,
  uid: number,
  paths: readonly string[],
  dotnet: DotnetInfo | undefined,
  options: ProcfsOptions,
): Promise<{ described: FileInTarget[]; version?: string | undefined }> {
  // Nothing on a FUSE or network file system is looked at: its server (the target, maybe) could hold the lookup, in a
  // thread of profcpu's, for good. Such files count as absent.
  const stallingAt = await stallingFileSystems(pid, options);
  const describe = (files: TargetFiles | undefined) =>
    Promise.all(
      paths.map(async (path) => ({
        path,
        hostPath: pathInTarget(pid, path, options),
        ...(files && !stallingAt(path) ? await files.describe(path) : { present: false }),
      })),
    );
  const files = await TargetFiles.open(pid, { ...options, uid }).catch(() => undefined);
  try {
    const described = await describe(files);
    if (!files || !dotnet || dotnet.version || stallingAt(dotnet.coreclrPath)) return { described };
    return { described, version: await selfContainedVersion(files, dotnet.coreclrPath) };
  } finally {
    await files?.close();
  }
}

/** Reads the /proc files of `pid` that inspection needs, turning "gone" and "not allowed" into typed errors. */
async function readProcFiles(pid: number, options: ProcfsOptions) {
  try {
    const [status, stat, cmdlineText] = await Promise.all([
      readStatus(pid, options),
      readStat(pid, options),
      readProcText(pid, 'cmdline', options),
    ]);
    // environ and maps need ptrace access: read second, so a missing process is reported as missing.
    const [environText, mapsText] = await Promise.all([
      readProcText(pid, 'environ', options),
      readProcText(pid, 'maps', options),
    ]);
    if (!status || !stat || cmdlineText === undefined || environText === undefined || mapsText === undefined)
      throw noSuchProcess(pid);
    return { status, stat, cmdlineText, environText, mapsText };
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'EACCES' && code !== 'EPERM') throw error;
    throw new ProfcpuError('TARGET_NOT_VISIBLE', `process ${pid} exists but its /proc entries cannot be read`, {
      remedy:
        'Run profcpu as root, or as the same user as the target, with CAP_SYS_PTRACE (a container needs --cap-add SYS_PTRACE or --privileged).',
      cause: error,
    });
  }
}

/** Reads what profcpu needs about `pid`. */
export async function inspectProcess(pid: number, options: ProcfsOptions = {}): Promise<TargetInfo> {
  const { status, stat, cmdlineText, environText, mapsText } = await readProcFiles(pid, options);
  const env = parseEnviron(parseNulList(environText));
  const dotnet = detectDotnet(mapsText, env);
  const cmdline = parseNulList(cmdlineText);
  const nspid = status.nspids.at(-1) ?? pid;
  const dir = dotnet?.perfMapDir ?? '/tmp';
  const uid = status.uid.effective;
  const { described, version } = await readTargetFiles(
    pid,
    uid,
    [`${dir}/perf-${nspid}.map`, `${dir}/jit-${nspid}.dump`],
    dotnet,
    options,
  );
  const [perfMap, jitDump] = described as [FileInTarget, FileInTarget];
  if (dotnet && version) dotnet.version = version;
  const info: TargetInfo = {
    pid,
    nspid,
    comm: status.name,
    cmdline,
    uid,
    runtime: detectRuntime(status.name, cmdline, dotnet),
    startTicks: stat.startTicks,
    perfMap,
    jitDump,
  };
  if (dotnet) info.dotnet = dotnet;
  return info;
}

export function noSuchProcess(pid: number): ProfcpuError {
  return new ProfcpuError('NO_TARGET', `no process ${pid} is visible here`, {
    remedy:
      "Check the PID with `profcpu ps`. From a sidecar container, share the target's PID namespace (docker run --pid=container:NAME, or shareProcessNamespace in Kubernetes).",
  });
}

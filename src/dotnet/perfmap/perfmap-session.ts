// `collect --perfmap auto|on|off` around one recording: a pid and a mode in; out, what the target writes now (perf
// map, jitdump), whether profcpu switched it on, a message for the user, and restore() to put the target back as
// it was. Decided from the target's environment (DOTNET_PerfMapEnabled/COMPlus_PerfMapEnabled) and the files it
// holds open, so a map enabled earlier over IPC (by another tool, or a run that crashed) is not enabled twice:
// the runtime would replay every method into the files again.
//
// One exception: .NET 10 abandons a jitdump enabled from the environment at startup (writing a 64 KiB stub block
// whose end is unreadable fails, and the runtime closes the file) unless DOTNET_PerfMapStubGranularity keeps whole
// blocks out of it. Such a target asked for a jitdump and holds none, so profcpu re-opens it (EnablePerfMap type 2,
// which also replays the ReadyToRun methods only the jitdump names) and leaves it on: DisablePerfMap has no type
// and would also stop the perf map the app writes by itself.
import { opendir, readlink } from 'node:fs/promises';
import { ProfcpuError } from '../../error.js';
import { pathInTarget, procPath } from '../../target/procfs.js';
import { disablePerfMap, enablePerfMap, type IpcOptions } from '../ipc/client.js';
import { perfMapType, type PerfMapType } from '../ipc/protocol.js';
import {
  findDiagnosticSocket,
  perfMapVariable,
  readEnvironment,
  runtimeSetting,
  type DiagnosticSocket,
} from '../ipc/socket-path.js';

export { perfMapVariable };

export type PerfMapMode = 'auto' | 'on' | 'off';

/**
 * - `enabled-by-profcpu`: switched on over IPC; restore() switches it off again.
 * - `already-enabled`: the target writes perf maps by itself; restore() does nothing.
 * - `jitdump-reopened`: the target's environment asks for a jitdump the runtime had abandoned; profcpu re-opened it
 *   over IPC (type 2) and leaves it on, since DisablePerfMap would stop the app's own perf map too; restore() does
 *   nothing.
 * - `unavailable` (auto only): could not be switched on; `message` says why and which variable to set.
 * - `left-alone`: mode off; nothing was sent.
 */
export type PerfMapState = 'enabled-by-profcpu' | 'already-enabled' | 'jitdump-reopened' | 'unavailable' | 'left-alone';

export interface PerfMapSession {
  state: PerfMapState;
  pid: number;
  /** The pid in the target's namespace: its files are /tmp/perf-<nspid>.map and /tmp/jit-<nspid>.dump. */
  nspid: number | undefined;
  /** The target's files as this process reaches them, through /proc/PID/root. They are never deleted. */
  perfMapPath: string | undefined;
  jitDumpPath: string | undefined;
  /** What profcpu switched on (states `enabled-by-profcpu`, `jitdump-reopened`), same values as DOTNET_PerfMapEnabled. */
  enabledType: PerfMapType | undefined;
  /** DOTNET_PerfMapEnabled's value in the target's environment, when set. */
  environmentSetting: string | undefined;
  /** One or two sentences for the user. */
  message: string;
  /** Why perf maps are unavailable (state `unavailable`). */
  error: ProfcpuError | undefined;
  /** Switches perf maps off again if profcpu switched them on; a target that exited meanwhile is fine. Idempotent. */
  restore(): Promise<void>;
}

export interface PreparePerfMapOptions extends IpcOptions {
  /** What to enable. Default 1: perf map and jitdump (the jitdump also names ReadyToRun framework code). */
  type?: PerfMapType;
}

const noop = (): Promise<void> => Promise.resolve();

/** File descriptors looked at, at most: a process may hold millions open, a runtime's perf map is among its first. */
const maxFdsExamined = 65_536;

/** Which perf-map files the runtime holds open right now (undefined when /proc/PID/fd is not readable). */
export async function openPerfMapFiles(
  pid: number,
  nspid: number,
  options: { procRoot?: string } = {},
): Promise<{ perfMap: boolean; jitDump: boolean } | undefined> {
  const fdDir = procPath(pid, 'fd', options);
  const found = { perfMap: false, jitDump: false };
  try {
    let examined = 0;
    for await (const entry of await opendir(fdDir, { bufferSize: 256 })) {
      if (++examined > maxFdsExamined) break;
      const target = await readlink(`${fdDir}/${entry.name}`).catch(() => '');
      if (target.endsWith(`/perf-${nspid}.map`)) found.perfMap = true;
      if (target.endsWith(`/jit-${nspid}.dump`)) found.jitDump = true;
      if (found.perfMap && found.jitDump) break;
    }
  } catch {
    return undefined;
  }
  return found;
}

/** DOTNET_PerfMapEnabled's value as the runtime reads it (hex); unset or unreadable counts as 0, off. */
export function perfMapSettingValue(value: string | undefined): number {
  if (value === undefined || !/^\s*(0x)?[0-9a-f]+\s*$/i.test(value)) return 0;
  return Number.parseInt(value.trim().replace(/^0x/i, ''), 16);
}

/** Nonzero DOTNET_PerfMapEnabled means the target writes maps by itself. */
export function perfMapEnabledBySetting(value: string | undefined): boolean {
  return perfMapSettingValue(value) !== 0;
}

/** Decides and, in auto/on, switches perf maps on for the recording of `pid`. Mode `on` throws where auto degrades. */
export async function preparePerfMap(
  pid: number,
  mode: PerfMapMode,
  options: PreparePerfMapOptions = {},
): Promise<PerfMapSession> {
  const environment = await readEnvironment(pid, options);
  const setting = runtimeSetting(environment, 'PerfMapEnabled');
  const base = { pid, environmentSetting: setting, enabledType: undefined, error: undefined, restore: noop };

  let socket;
  try {
    socket = await findDiagnosticSocket(pid, options);
  } catch (error) {
    if (!(error instanceof ProfcpuError) || error.code === 'NO_TARGET') throw error;
    if (mode === 'off' || perfMapEnabledBySetting(setting)) {
      const files = { nspid: undefined, perfMapPath: undefined, jitDumpPath: undefined };
      return mode === 'off'
        ? { ...base, ...files, state: 'left-alone', message: offMessage(setting) }
        : { ...base, ...files, state: 'already-enabled', message: `The target sets DOTNET_PerfMapEnabled=${setting}.` };
    }
    return unavailable(mode, { ...base, nspid: undefined, perfMapPath: undefined, jitDumpPath: undefined }, error);
  }

  // The socket stays held while perf maps may need switching off again; every other outcome lets go of it here.
  const held = socket;
  let keep = false;
  try {
    const session = await decide(pid, mode, options, held, setting, base);
    keep = session.state === 'enabled-by-profcpu';
    return session;
  } finally {
    if (!keep) await held.release();
  }
}

async function decide(
  pid: number,
  mode: PerfMapMode,
  options: PreparePerfMapOptions,
  socket: DiagnosticSocket,
  setting: string | undefined,
  base: Pick<PerfMapSession, 'pid' | 'environmentSetting' | 'enabledType' | 'error' | 'restore'>,
): Promise<PerfMapSession> {
  const environment = socket.environment;
  const nspid = socket.nspid;
  // Since .NET 8 the files go to /tmp (never $TMPDIR) unless DOTNET_PerfMapJitDumpPath says otherwise.
  const dir = runtimeSetting(environment, 'PerfMapJitDumpPath') || '/tmp';
  const files = {
    nspid,
    perfMapPath: pathInTarget(pid, `${dir}/perf-${nspid}.map`, options),
    jitDumpPath: pathInTarget(pid, `${dir}/jit-${nspid}.dump`, options),
  };
  if (mode === 'off') return { ...base, ...files, state: 'left-alone', message: offMessage(setting) };

  const open = await openPerfMapFiles(pid, nspid, options);
  if (open && !open.jitDump && settingWantsJitDump(setting)) {
    try {
      await enablePerfMap(socket.path, { ...options, type: perfMapType.jitDump });
    } catch (error) {
      if (!(error instanceof ProfcpuError) || error.code === 'ABORTED') throw error;
      const message =
        `Perf maps on: the target sets DOTNET_PerfMapEnabled=${setting}, but its runtime abandoned the jitdump and ` +
        `re-opening it over diagnostic IPC failed (${error.message}). ${noJitDumpAdvice(setting)}`;
      return { ...base, ...files, state: 'already-enabled', error, message };
    }
    return {
      ...base,
      ...files,
      state: 'jitdump-reopened',
      enabledType: perfMapType.jitDump,
      message:
        `Perf maps on: the target sets DOTNET_PerfMapEnabled=${setting}, but its runtime had abandoned the jitdump ` +
        '(which alone names ReadyToRun framework code); profcpu re-opened it over diagnostic IPC and leaves it on ' +
        'after the recording, as switching it off would stop the app’s own perf map too.',
    };
  }
  if (perfMapEnabledBySetting(setting) || open?.perfMap || open?.jitDump) {
    const how = perfMapEnabledBySetting(setting)
      ? `the target sets DOTNET_PerfMapEnabled=${setting}`
      : 'the target already writes them (enabled over diagnostic IPC earlier)';
    const missing = open && !open.jitDump ? ` ${noJitDumpAdvice(setting)}` : '';
    return { ...base, ...files, state: 'already-enabled', message: `Perf maps on: ${how}.${missing}` };
  }

  const type = options.type ?? perfMapType.all;
  try {
    await enablePerfMap(socket.path, { ...options, type });
  } catch (error) {
    if (!(error instanceof ProfcpuError) || error.code === 'ABORTED') throw error;
    return unavailable(mode, { ...base, ...files }, error);
  }
  // Restoring must work after the session was aborted too, so it keeps the deadline but not the signal.
  const { signal: _signal, ...restoreOptions } = options;
  let restored: Promise<void> | undefined;
  const restore = (): Promise<void> => {
    restored ??= disablePerfMap(socket.path, restoreOptions)
      .catch((error: unknown) => {
        // The target exiting during the recording ends its perf map too; nothing to restore.
        if (error instanceof ProfcpuError && (error.code === 'IPC_UNREACHABLE' || error.code === 'NO_TARGET')) return;
        throw error;
      })
      .finally(() => socket.release());
    return restored;
  };
  return {
    ...base,
    ...files,
    state: 'enabled-by-profcpu',
    enabledType: type,
    message: `Perf maps switched on over diagnostic IPC (type ${type}); they are switched off again after the recording.`,
    restore,
  };
}

/** DOTNET_PerfMapEnabled=1 or 2: the app asked for a jitdump (3 is the perf map alone, a choice left alone). */
function settingWantsJitDump(setting: string | undefined): boolean {
  const type = perfMapSettingValue(setting);
  return type === perfMapType.all || type === perfMapType.jitDump;
}

function noJitDumpAdvice(setting: string | undefined): string {
  const advice = 'It writes no jitdump now, so ReadyToRun framework frames may stay unnamed';
  if (perfMapSettingValue(setting) === perfMapType.perfMap) return `${advice}: set DOTNET_PerfMapEnabled=1 to add it.`;
  if (settingWantsJitDump(setting)) return `${advice}: ${stubGranularityAdvice}`;
  return `${advice}.`;
}

/**
 * .NET 10 closes a jitdump for good when it logs a stub block it cannot read whole; granularity 2 logs the stubs one
 * by one instead of by block (still named), while 4 would stop logging stubs at all (measured on 10.0.12).
 */
export const stubGranularityAdvice =
  'start the app with DOTNET_PerfMapStubGranularity=2 as well, which keeps the jitdump open and names runtime stubs.';

function offMessage(setting: string | undefined): string {
  return perfMapEnabledBySetting(setting)
    ? `--perfmap off: left as is (the target sets DOTNET_PerfMapEnabled=${setting}).`
    : '--perfmap off: left as is; unless the target writes perf maps by itself, JIT-compiled frames stay unnamed.';
}

function unavailable(
  mode: PerfMapMode,
  session: Omit<PerfMapSession, 'state' | 'message'>,
  error: ProfcpuError,
): PerfMapSession {
  const why =
    error.code === 'IPC_UNSUPPORTED'
      ? 'the target’s .NET is older than 8 and cannot switch perf maps on at run time'
      : `diagnostic IPC failed (${error.message})`;
  const remedy = `Restart the target with ${perfMapVariable} (in a container: add it to the service's environment) to name JIT-compiled frames.`;
  if (mode === 'on') {
    throw new ProfcpuError(error.code, `--perfmap on: cannot switch perf maps on: ${why}`, { remedy, cause: error });
  }
  return {
    ...session,
    state: 'unavailable',
    error,
    message: `Perf maps unavailable: ${why}. JIT-compiled frames will show as [unknown]. ${remedy}`,
  };
}

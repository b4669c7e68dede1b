// `collect --perfmap auto|on|off` as a collect step: before recording, switch the .NET target's perf map and jitdump
// on over diagnostic IPC when it does not write them by itself; after recording (or when the session is aborted),
// switch them off again if profcpu switched them on. The report goes to the manifest under `collect.steps.perfMap`.
import type { CollectStep, StepContext, StepReport } from '../collect/steps.js';
import {
  openPerfMapFiles,
  preparePerfMap,
  type PerfMapMode,
  type PerfMapSession,
  type PreparePerfMapOptions,
} from './perfmap-session.js';
import { perfMapType } from './protocol.js';

export interface PerfMapStepOptions extends Omit<PreparePerfMapOptions, 'signal'> {
  mode: PerfMapMode;
}

export const perfMapStepDefaults = Object.freeze({ mode: 'auto' as PerfMapMode });

function report(mode: PerfMapMode, session: PerfMapSession): StepReport {
  return {
    mode,
    state: session.state,
    message: session.message,
    ...(session.nspid !== undefined && { nspid: session.nspid }),
    ...(session.environmentSetting !== undefined && { environmentSetting: session.environmentSetting }),
    ...(session.error && { errorCode: session.error.code }),
  };
}

export function perfMapStep(options: PerfMapStepOptions = perfMapStepDefaults): CollectStep {
  const { mode, ...ipcOptions } = options;
  let session: PerfMapSession | undefined;
  return {
    name: 'perfMap',
    async beforeRecording(context: StepContext): Promise<StepReport> {
      if (context.target.runtime !== 'dotnet') return { mode, state: 'not-dotnet' };
      session = await preparePerfMap(context.target.pid, mode, { ...ipcOptions, signal: context.signal });
      if (session.state === 'unavailable') context.warn(session.message);
      else context.progress(session.message);
      if (session.state === 'enabled-by-profcpu') {
        // An aborted session skips the after-recording steps; leave the target as it was all the same.
        const restoring = session;
        context.signal.addEventListener('abort', () => void restoring.restore().catch(() => {}), { once: true });
      }
      return report(mode, session);
    },
    async afterRecording(context: StepContext): Promise<StepReport | undefined> {
      if (session?.state !== 'enabled-by-profcpu' || session.nspid === undefined) return undefined;
      // .NET 10.0.12 was seen closing a jitdump within seconds of switching it on, after logging a stub block,
      // unless the target sets DOTNET_PerfMapStubGranularity=4; then ReadyToRun frames stay unnamed. Say so.
      const open = await openPerfMapFiles(session.pid, session.nspid, ipcOptions);
      const wantedJitDump = session.enabledType === perfMapType.all || session.enabledType === perfMapType.jitDump;
      const jitDumpStopped = wantedJitDump && open !== undefined && !open.jitDump;
      if (jitDumpStopped) {
        context.warn(
          'the .NET runtime stopped writing its jitdump during the recording, so ReadyToRun framework frames may stay unnamed; start the target with DOTNET_PerfMapStubGranularity=4 to keep it (a .NET 10 behaviour)',
        );
      }
      await session.restore();
      return { restored: true, ...(jitDumpStopped && { jitDumpStopped }) };
    },
  };
}

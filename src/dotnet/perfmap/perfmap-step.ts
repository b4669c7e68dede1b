// `collect --perfmap auto|on|off` as a collect step: before recording, switch the .NET target's perf map and jitdump
// on over diagnostic IPC when it does not write them by itself (or re-open the jitdump its environment asked for and
// the runtime abandoned); after recording (or when the session is aborted), switch them off again if profcpu switched
// them on, and say whether the jitdump lasted. The report goes to the manifest under `collect.steps.perfMap`.
import type { CollectStep, StepContext, StepReport } from '../../step/step.js';
import {
  openPerfMapFiles,
  preparePerfMap,
  type PerfMapMode,
  type PerfMapSession,
  type PreparePerfMapOptions,
  stubGranularityAdvice,
} from './perfmap-session.js';
import { perfMapType } from '../ipc/protocol.js';

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
    ...(session.enabledType !== undefined && { enabledType: session.enabledType }),
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
      const state = session?.state;
      if ((state !== 'enabled-by-profcpu' && state !== 'jitdump-reopened') || session?.nspid === undefined) {
        return undefined;
      }
      const open = await openPerfMapFiles(session.pid, session.nspid, ipcOptions);
      const wantedJitDump = session.enabledType === perfMapType.all || session.enabledType === perfMapType.jitDump;
      const jitDumpStopped = wantedJitDump && open !== undefined && !open.jitDump;
      if (jitDumpStopped) {
        context.warn(
          `the .NET runtime stopped writing its jitdump during the recording (after logging a stub block it could not read), so ReadyToRun framework frames compiled since may stay unnamed; to keep it open, ${stubGranularityAdvice}`,
        );
      }
      const stopped = jitDumpStopped ? { jitDumpStopped } : {};
      // DisablePerfMap has no type: sent to an app that writes its own perf map, it would stop that map too.
      if (state === 'jitdump-reopened') return { restored: false, jitDumpLeftOn: !jitDumpStopped, ...stopped };
      await session.restore();
      return { restored: true, ...stopped };
    },
  };
}

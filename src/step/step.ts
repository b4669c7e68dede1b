// Steps a collect session runs around the recording, for what depends on the target's runtime: e.g. enabling a .NET
// perf map over the diagnostic socket before recording and restoring it after, or fetching debug symbols after
// recording. A step gets the target and the output folder and returns a JSON-able report for the manifest. A step
// that throws is reported as a warning and the profile goes on (a missing perf map or symbol server must not cost
// the recording); only an abort stops the session.
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import type { Warn } from '../diagnostics.js';
import { sampledFiles, type SampledFile } from '../perf/buildid-cache.js';
import type { ElfInfo } from '../formats/elf/elf.js';
import type { TargetInfo } from '../target/inspect.js';
import type { TargetFiles } from '../target/target-files.js';

export interface StepContext {
  target: TargetInfo;
  /** The output folder. */
  dir: string;
  /** The perf executable the session records with. */
  perfPath: string;
  /** Where procfs is mounted. */
  procRoot: string;
  /**
   * How the session records call chains: `mixed` (stack copies, unwound after by the files' CFI) makes the steps keep
   * what that unwinding reads too. Default fp.
   */
  unwind?: 'fp' | 'mixed';
  /**
   * The target's file system, opened when the session began: it still reads the target's root after the target
   * exited (its submounts are gone then). Undefined in tests that give no session.
   */
  files?: TargetFiles;
  /**
   * The files perf sampled, asked of perf once per session (`perf buildid-list` reads the whole perf.data) for the
   * steps that need them after recording. Undefined in tests that give no session: sampledFilesOf asks perf then.
   */
  sampledFiles?: () => Promise<SampledFile[]>;
  /**
   * Reads the ELF facts of a file of the target's in the target reader (src/collect/target-reader.ts), for the steps
   * that run here yet need some; ProfcpuErrors (IO) when it cannot. Undefined in tests that give no session: the
   * step reads the file itself then.
   */
  readTargetElf?: (path: string) => Promise<ElfInfo>;
  signal: AbortSignal;
  warn: Warn;
  progress: (message: string) => void;
}

export type StepReport = Record<string, unknown>;

export interface CollectStep {
  /** Key of the step's report under `collect.steps` in the manifest. */
  name: string;
  /** Runs after preflight, before perf starts. */
  beforeRecording?(context: StepContext): Promise<StepReport | undefined>;
  /** Runs after perf stopped, before postprocess, also when the recording was stopped early. */
  afterRecording?(context: StepContext): Promise<StepReport | undefined>;
}

/** The files perf sampled in the context's recording, asked of perf. */
function askPerf(context: Pick<StepContext, 'dir' | 'perfPath' | 'signal'>): Promise<SampledFile[]> {
  return sampledFiles(join(context.dir, layout.perfData), { perfPath: context.perfPath, signal: context.signal });
}

/** The files perf sampled in the context's recording: the session's answer, else perf's. */
export function sampledFilesOf(context: StepContext): Promise<SampledFile[]> {
  return context.sampledFiles?.() ?? askPerf(context);
}

/** For a session's context: perf asked once, its first answer (or failure) every caller's. */
export function onceSampledFiles(
  context: Pick<StepContext, 'dir' | 'perfPath' | 'signal'>,
): () => Promise<SampledFile[]> {
  let answer: Promise<SampledFile[]> | undefined;
  return () => (answer ??= askPerf(context));
}

// The target reader's process (src/collect/target-reader.ts explains why it exists): it opens the target's root,
// builds the collect steps that read the target's files or memory and the snapshotter of its perf map and jitdump,
// and runs their passes when the session asks. Whatever blocks here blocks this process only; the session kills it.
import { ProfcpuError, isProfcpuError } from '../error.js';
import { OutputFolder } from '../files/output-folder.js';
import type { SampledFile } from '../perf/buildid-cache.js';
import { readTargetElf } from '../debug-files/debug-symbols.js';
import { TargetFiles } from '../target/target-files.js';
import { targetReaderSteps } from './registry.js';
import { TargetSnapshotter } from './snapshot.js';
import { stallingMappingsOf, stallingMappingsOfEvery } from '../target/mounts.js';
import type { CollectStep, StepContext } from '../step/step.js';
import { type ReaderInit, type ReaderMessage, type ReaderRequest } from './target-reader.js';

interface Session {
  init: ReaderInit;
  files: TargetFiles;
  /** Opened at the first pass: the folder does not exist yet when the target's root is opened. */
  snapshotter?: TargetSnapshotter;
  steps: Map<string, CollectStep>;
  context: StepContext;
}

const send = (message: ReaderMessage) => process.send?.(message);
// Nothing here is ever aborted: the session kills this process instead.
const signal = new AbortController().signal;
let session: Session | undefined;
let nextSampled = 1;
const sampledWaiters = new Map<number, (answer: { value?: SampledFile[]; error?: string }) => void>();

/** The files perf sampled, asked of the session (which asks perf once for all its steps). */
function sampledFiles(): Promise<SampledFile[]> {
  const id = nextSampled++;
  return new Promise((resolve, reject) => {
    sampledWaiters.set(id, (answer) => (answer.value ? resolve(answer.value) : reject(new Error(answer.error))));
    send({ type: 'sampled', id });
  });
}

async function open(init: ReaderInit): Promise<Session> {
  const { target, procRoot, dir } = init;
  const warn = (message: string) => send({ type: 'warn', message });
  let files: TargetFiles;
  try {
    // This process reads what lies on a FUSE or network file system too: the session kills it if a read never ends.
    files = await TargetFiles.open(target.pid, { procRoot, uid: target.uid, signal, stallingMounts: 'read' });
  } catch (error) {
    throw new ProfcpuError('TARGET_NOT_VISIBLE', `cannot open the file system of process ${target.pid}`, {
      remedy: 'Run profcpu as root (or as the target’s user with CAP_SYS_PTRACE), sharing its PID namespace.',
      cause: error,
    });
  }
  const context: StepContext = {
    target,
    dir,
    perfPath: init.perfPath,
    procRoot,
    unwind: init.unwind,
    files,
    sampledFiles,
    signal,
    warn,
    progress: (message) => send({ type: 'progress', message }),
  };
  return { init, files, steps: new Map(targetReaderSteps().map((s) => [s.name, s])), context };
}

async function snapshotterOf({ init, files, context }: Session): Promise<TargetSnapshotter> {
  // Left open for the life of this process, which the session ends.
  const folder = await OutputFolder.open(init.dir);
  const options = { procRoot: init.procRoot, maxBytes: init.snapshotMaxBytes };
  return new TargetSnapshotter(folder, files, init.target, options, context.warn);
}

async function answer(request: Exclude<ReaderRequest, { type: 'sampled' }>): Promise<unknown> {
  if (request.type === 'open') {
    session = await open(request.init);
    return undefined;
  }
  if (!session) throw new Error('the target reader was not opened');
  if (request.type === 'elf') return readTargetElf(session.files, request.path);
  if (request.type === 'stalling') {
    const options = { procRoot: session.init.procRoot };
    const pid = session.init.target.pid;
    return request.everyProcess ? stallingMappingsOfEvery(options) : stallingMappingsOf(pid, options);
  }
  if (request.type === 'refresh') {
    const snapshotter = (session.snapshotter ??= await snapshotterOf(session));
    await snapshotter.refresh();
    return snapshotter.report();
  }
  const step = session.steps.get(request.step);
  const run = step?.[request.when];
  if (!step || !run) return undefined;
  return run.call(step, session.context);
}

process.on('message', (request: ReaderRequest) => {
  if (request.type === 'sampled') {
    const waiter = sampledWaiters.get(request.id);
    sampledWaiters.delete(request.id);
    waiter?.(request);
    return;
  }
  answer(request).then(
    (value) => send({ type: 'done', id: request.id, value }),
    (error: unknown) =>
      send({
        type: 'failed',
        id: request.id,
        error: {
          message: error instanceof Error ? error.message : String(error),
          ...(isProfcpuError(error) && { code: error.code }),
          ...(isProfcpuError(error) && error.remedy !== undefined && { remedy: error.remedy }),
        },
      }),
  );
});
// The session went away (ended, or killed): so does this process, blocked reads or not.
process.on('disconnect', () => process.kill(process.pid, 'SIGKILL'));

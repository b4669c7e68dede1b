// The child process that reads the target for a collect session. A read of a target's file or memory can block
// in the kernel for good (a file on a FUSE mount the target serves and stops answering): a deadline in profcpu
// only stops waiting, the thread stays blocked, `FileHandle.close()` waits for it, four such threads stall every
// later file operation, and the process cannot even exit (libuv joins its threads at exit). A process blocked in
// a FUSE wait can be killed, though. So every step that reads the target's files or memory, and the snapshots of
// its perf map and jitdump, run in one child per session (src/collect/target-reader-child.ts), which is killed
// (SIGKILL) when one of its passes outlives `passTimeoutMs` or the session is aborted. After that the session
// reads nothing more from the target: a second child would hang on the same file, so later passes are skipped
// with a warning, and the profile goes on with what was kept.
//
// The child rebuilds what it needs from plain values (pid, procRoot, output folder, target info), writes its outputs
// into the output folder itself, sends its warnings and progress lines here, and returns each pass's report.
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Warn } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import type { SampledFile } from '../perf/buildid-cache.js';
import type { ElfInfo } from '../formats/elf/elf.js';
import type { TargetInfo } from '../target/inspect.js';
import type { StallingMapping } from '../target/mounts.js';
import type { SnapshotReport } from './snapshot.js';
import type { CollectStep, StepReport } from '../step/step.js';

/** A stand-in for a step of the target reader's (registry.ts): its passes run in the reader. */
export function readerStep(reader: TargetReader, step: CollectStep): CollectStep {
  return {
    name: step.name,
    ...(step.beforeRecording && { beforeRecording: () => reader.step(step.name, 'beforeRecording') }),
    ...(step.afterRecording && { afterRecording: () => reader.step(step.name, 'afterRecording') }),
  };
}

/** What the child is started with: plain values only. */
export interface ReaderInit {
  target: TargetInfo;
  procRoot: string;
  /** The output folder. */
  dir: string;
  perfPath: string;
  /** The snapshots' byte cap. */
  snapshotMaxBytes: number;
  /** How the session records call chains (StepContext.unwind). */
  unwind: 'fp' | 'mixed';
}

export const targetReaderDefaults = Object.freeze({
  /** Time one pass (a step's, a snapshot refresh, opening the target's root) may take, ms. Default 120 s. */
  passTimeoutMs: 120_000,
});

/** Messages from the child. */
export type ReaderMessage =
  | { type: 'warn' | 'progress'; message: string }
  | { type: 'done'; id: number; value: unknown }
  | { type: 'failed'; id: number; error: { message: string; code?: string; remedy?: string } }
  | { type: 'sampled'; id: number };

/** Requests to the child. */
export type ReaderRequest =
  | { type: 'open'; id: number; init: ReaderInit }
  | { type: 'step'; id: number; step: string; when: 'beforeRecording' | 'afterRecording' }
  | { type: 'refresh'; id: number }
  | { type: 'stalling'; id: number; everyProcess: boolean }
  | { type: 'elf'; id: number; path: string }
  | { type: 'sampled'; id: number; value?: SampledFile[]; error?: string };

export interface TargetReaderContext {
  signal: AbortSignal;
  warn: Warn;
  progress: (message: string) => void;
  /** The files perf sampled, for the steps after recording (asked of perf once per session by the parent). */
  sampledFiles: () => Promise<SampledFile[]>;
  passTimeoutMs?: number;
}

/** The child's entry: the built module next to this one, or the TypeScript source when run from src (tests). */
function childEntry(): string {
  const built = fileURLToPath(new URL('./target-reader-child.js', import.meta.url));
  return existsSync(built) ? built : fileURLToPath(new URL('./target-reader-child.ts', import.meta.url));
}

/** Why the reader stopped for good, once it has. */
type Stopped = { reason: string };

export class TargetReader {
  private child: ChildProcess | undefined;
  private stopped: Stopped | undefined;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private readonly onAbort = () => this.kill('collect was aborted');
  private readonly timeoutMs: number;
  private remedyText =
    'a read of the target never returned: look for a FUSE or network file system among its mounts ' +
    '(/proc/PID/mountinfo); if its reads are only slow, raise --target-timeout';

  private constructor(private readonly context: TargetReaderContext) {
    this.timeoutMs = context.passTimeoutMs ?? targetReaderDefaults.passTimeoutMs;
  }

  /** Starts the child and opens the target's root in it. Throws what the open threw (a ProfcpuError). */
  static async start(init: ReaderInit, context: TargetReaderContext): Promise<TargetReader> {
    const reader = new TargetReader(context);
    reader.spawn();
    try {
      await reader.call({ type: 'open', init }, 'opening the target’s root');
    } catch (error) {
      reader.close();
      throw error;
    }
    return reader;
  }

  /** Runs one pass of a step in the child; its report, or a ProfcpuError (ABORTED on abort). */
  async step(step: string, when: 'beforeRecording' | 'afterRecording'): Promise<StepReport | undefined> {
    return (await this.call({ type: 'step', step, when }, `the ${step} step`)) as StepReport | undefined;
  }

  /** Refreshes the snapshots in the child; their report, or undefined once the reader stopped (warned once). */
  async refresh(): Promise<SnapshotReport | undefined> {
    try {
      return (await this.call({ type: 'refresh' }, 'the perf map and jitdump snapshots')) as SnapshotReport;
    } catch (error) {
      if (this.context.signal.aborted) return undefined;
      if (!(error instanceof ReaderStoppedError)) this.context.warn(`snapshots: ${(error as Error).message}`);
      return undefined;
    }
  }

  /**
   * The files the target maps from a FUSE or network file system (src/target/mounts.ts), each saying whether it is
   * mapped executable, or those of every process visible (`everyProcess`: perf -a reads them all), or undefined when
   * the reader could not say (stopped, or failed: the caller then assumes there are some).
   */
  async stallingMappings(everyProcess: boolean): Promise<StallingMapping[] | undefined> {
    const request = { type: 'stalling', everyProcess } as const;
    return (await this.call(request, 'the check of the target’s mounts').catch(() => undefined)) as
      StallingMapping[] | undefined;
  }

  /**
   * A target's file's ELF facts, read in the child. ProfcpuErrors (IO) only, also once the reader stopped, so that a
   * caller reading several files reports this one unreadable and goes on.
   */
  async readElf(path: string): Promise<ElfInfo> {
    try {
      return (await this.call({ type: 'elf', path }, `reading ${path}`)) as ElfInfo;
    } catch (error) {
      if (error instanceof ReaderStoppedError) throw new ProfcpuError('IO', `${path}: ${error.message}`);
      throw error;
    }
  }

  /** The files perf sampled, as the session asks them (once). */
  get sampledFiles(): () => Promise<SampledFile[]> {
    return this.context.sampledFiles;
  }

  /** Why the reader stopped (killed at a deadline or on abort), if it did. */
  get stoppedReason(): string | undefined {
    return this.stopped?.reason;
  }

  /**
   * Ends the child (it has nothing to finish: every pass wrote its outputs before answering), without waiting for it:
   * a child blocked in a FUSE request its server has already read stays in the kernel, killed or not, until that
   * connection ends, and a handle on it would keep profcpu from exiting.
   */
  close(): void {
    this.context.signal.removeEventListener('abort', this.onAbort);
    const child = this.child;
    this.child = undefined;
    if (!child) return;
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (child.connected) child.disconnect();
    child.stderr?.destroy();
    child.unref();
  }

  /** Sets what the warning given when a pass outlives its deadline advises (the session knows more of the target). */
  adviseOnTimeout(text: string): void {
    this.remedyText = text;
  }

  private spawn(): void {
    const child = fork(childEntry(), [], {
      serialization: 'advanced',
      // Its own process group: a terminal's Ctrl-C reaches profcpu, which decides what the child does.
      detached: true,
      // Not profcpu's own stdout and stderr: a killed child whose thread stays blocked in a FUSE request keeps its
      // files open, and whoever reads profcpu's output (a pipe, a test) would wait for that connection to end. It
      // says everything over IPC; its stderr (a crash) is warned here, cut short, and let go of when it is closed.
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child = child;
    child.stderr?.on('data', (chunk: Buffer) =>
      this.context.warn(`target reader: ${chunk.toString('utf8', 0, 4096).trimEnd()}`),
    );
    child.on('message', (message: ReaderMessage) => this.receive(message));
    child.on('exit', (code, signal) => {
      if (this.child === child) {
        // Not ended by the session: say so once.
        this.child = undefined;
        if (!this.stopped && !this.context.signal.aborted)
          this.context.warn(
            `the target reader ended (${signal ?? `exit code ${code}`}): nothing more is read from the target`,
          );
      }
      this.stopped ??= { reason: `the target reader ended (${signal ?? `exit code ${code}`})` };
      this.failAll();
    });
    child.on('error', (error) => {
      this.stopped ??= { reason: `the target reader failed: ${error.message}` };
      this.failAll();
    });
    this.context.signal.addEventListener('abort', this.onAbort, { once: true });
  }

  private kill(reason: string): void {
    this.stopped ??= { reason };
    this.close();
    this.failAll();
  }

  private failAll(): void {
    for (const [id, { reject }] of this.pending) {
      this.pending.delete(id);
      reject(this.stoppedError());
    }
  }

  private stoppedError(): Error {
    if (this.context.signal.aborted)
      return new ProfcpuError('ABORTED', 'collect was aborted; the raw data written so far is kept');
    return new ReaderStoppedError(`not done, the target reader was stopped: ${this.stopped?.reason ?? 'it ended'}`);
  }

  private receive(message: ReaderMessage): void {
    switch (message.type) {
      case 'warn':
        this.context.warn(message.message);
        return;
      case 'progress':
        this.context.progress(message.message);
        return;
      case 'sampled':
        this.context.sampledFiles().then(
          (value) => this.send({ type: 'sampled', id: message.id, value }),
          (error: unknown) => this.send({ type: 'sampled', id: message.id, error: String(error) }),
        );
        return;
      case 'done':
      case 'failed': {
        const waiter = this.pending.get(message.id);
        if (!waiter) return;
        this.pending.delete(message.id);
        if (message.type === 'done') waiter.resolve(message.value);
        else {
          const { code, message: text, remedy } = message.error;
          waiter.reject(
            code ? new ProfcpuError(code as ProfcpuError['code'], text, remedy ? { remedy } : {}) : new Error(text),
          );
        }
        return;
      }
    }
  }

  private send(request: ReaderRequest): void {
    this.child?.send(request);
  }

  /** Sends a request and waits for its answer, killing the child when the pass outlives the timeout. */
  private call(request: DistributiveOmit<ReaderRequest, 'id'>, what: string): Promise<unknown> {
    if (this.context.signal.aborted || this.stopped || !this.child) return Promise.reject(this.stoppedError());
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        const reason = `${what} did not end within ${this.timeoutMs / 1000} s`;
        this.context.warn(
          `${reason}: the target reader was killed, and nothing more is read from the target in this session ` +
            `(fix: ${this.remedyText})`,
        );
        this.kill(reason);
      }, this.timeoutMs);
      this.pending.set(id, {
        resolve: (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      this.send({ ...request, id } as ReaderRequest);
    });
  }
}

/** A pass refused or cut short because the reader was stopped (warned once, when it was). */
export class ReaderStoppedError extends Error {}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;

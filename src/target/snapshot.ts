// Copies of a live target's perf map, jitdump and /proc/PID/maps into an output folder, taken repeatedly while it
// runs so the bundle can be post-processed after the target is gone. Maps grow as code is JIT-compiled, so the
// latest copy is the best one; but a dying target may delete its map (Node does) or leave it half-written, so a new
// copy replaces the previous one only when it was read whole and is not smaller. Each copy goes to a temporary file
// first and is renamed into place, so the folder always holds a complete earlier copy.
import { copyFile, mkdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { layout } from '../bundle/layout.js';
import type { TargetInfo } from './inspect.js';
import { procPath, type ProcfsOptions } from './procfs.js';

export interface SnapshotFileState {
  /** Path in the output folder, relative to it. */
  file: string;
  /** Where it is copied from (through /proc/PID/root). */
  source: string;
  copies: number;
  bytes: number;
  /** Source mtime of the copy kept, ms since the epoch. */
  sourceMtimeMs?: number;
  /** Why the last attempt kept the earlier copy, if it did. */
  lastMiss?: string;
}

export interface SnapshotReport {
  perfMap: SnapshotFileState;
  jitDump: SnapshotFileState;
  procMaps: SnapshotFileState;
}

/** Takes and refreshes the snapshots of one target into `dir`. Owned by one collect session. */
export class TargetSnapshotter {
  private readonly states: SnapshotReport;

  constructor(
    private readonly dir: string,
    target: TargetInfo,
    options: ProcfsOptions = {},
  ) {
    const state = (file: string, source: string): SnapshotFileState => ({ file, source, copies: 0, bytes: 0 });
    this.states = {
      perfMap: state(layout.perfMap(target.nspid), target.perfMap.hostPath),
      jitDump: state(layout.jitDump(target.nspid), target.jitDump.hostPath),
      procMaps: state(layout.procMaps, procPath(target.pid, 'maps', options)),
    };
  }

  /** Refreshes every snapshot whose source changed; never throws for a vanished target. */
  async refresh(): Promise<void> {
    await mkdir(join(this.dir, layout.targetDir), { recursive: true });
    await Promise.all([
      this.copyGrowing(this.states.perfMap),
      this.copyGrowing(this.states.jitDump),
      this.copyProcMaps(),
    ]);
  }

  report(): SnapshotReport {
    return structuredClone(this.states);
  }

  private async copyGrowing(state: SnapshotFileState): Promise<void> {
    let before;
    try {
      before = await stat(state.source);
    } catch (error) {
      state.lastMiss = missReason(error);
      return;
    }
    if (state.sourceMtimeMs === before.mtimeMs && state.bytes === before.size) return;
    if (before.size < state.bytes) {
      state.lastMiss = `source shrank from ${state.bytes} to ${before.size} bytes`;
      return;
    }
    const target = join(this.dir, state.file);
    const temporary = `${target}.partial`;
    try {
      await copyFile(state.source, temporary);
      const copied = await stat(temporary);
      if (copied.size < state.bytes) throw new Error(`copy shrank to ${copied.size} bytes`);
      await rename(temporary, target);
      state.copies++;
      state.bytes = copied.size;
      state.sourceMtimeMs = before.mtimeMs;
      delete state.lastMiss;
    } catch (error) {
      state.lastMiss = missReason(error);
      await rm(temporary, { force: true });
    }
  }

  // /proc/PID/maps reports size 0, so it is read whole each time; an empty read means the process is exiting.
  private async copyProcMaps(): Promise<void> {
    const state = this.states.procMaps;
    const target = join(this.dir, state.file);
    const temporary = `${target}.partial`;
    try {
      // copyFile trusts the reported size (0 for procfs files) and would copy nothing.
      const text = await readFile(state.source);
      if (text.length === 0) throw new Error('the process is exiting (empty maps)');
      await writeFile(temporary, text);
      await rename(temporary, target);
      state.copies++;
      state.bytes = text.length;
      delete state.lastMiss;
    } catch (error) {
      state.lastMiss = missReason(error);
      await rm(temporary, { force: true });
    }
  }
}

function missReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOENT' || code === 'ESRCH') return 'not present (or the target is gone)';
  return error instanceof Error ? error.message : String(error);
}

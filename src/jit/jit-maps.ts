// The perf maps the built-in engine names JIT code from, one per process as perf recorded it: takes the output folder
// and whether perf.data was recorded on this machine, gives each process's table, loaded when its first frame asks,
// and says where each came from. perf script names a process's anonymous code from `/tmp/perf-<pid>.map` alone; so
// does the built-in engine, for process <pid>:
//   1. on this machine, when the recording was made here, at `/tmp/perf-<pid>.map`, where perf reads it: a regular
//      file (through a link, as perf), its first GiB. perf opens whatever is there, and hangs on a FIFO another user
//      left there: this opens nothing else. perf 6.1 and 7.3 read a map whatever its owner (checked: a map owned by
//      another user is read), and so does this;
//   2. else at the folder's copy: collect's snapshot (`target/perf-<nspid>.map`, under the PID target.json says perf
//      saw: perf-maps.ts), or a copy beside perf.data, `perf-<pid>.map`, as people copy it next to a recording made
//      by hand.
// postprocess --engine perf places the copies at /tmp for perf where /tmp has none (perf-maps.ts), so both engines
// read the same maps. Maps load one at a time, and 4 GiB of them at most in a run (a JIT writes a few hundred MB).
import type { Warn } from '../diagnostics.js';
import { readMachineFile } from '../files/machine-files.js';
import type { OutputFolder } from '../files/output-folder.js';
import { lookupTable, sortedAsPerf, type FunctionTable } from '../formats/function-table.js';
import { columnTable, FunctionRows, maxColumnValue } from '../formats/function-columns.js';
import { readPerfMap } from '../formats/jit/perfmap.js';

/** Bytes of a perf map read at most (the snapshots' cap, src/dotnet/naming/folder-resolver.ts). */
export const maxPerfMapBytes = 1 << 30;
/** Bytes of perf maps read at most in one run, all processes together. */
export const maxTotalPerfMapBytes = 4 * 2 ** 30;

export type PerfMapOrigin = 'snapshot' | 'folder' | 'machine';

/** A perf map the engine read, for the summary and manifest.json. */
export interface PerfMapUse {
  /** The PID perf recorded for the process. */
  pid: number;
  /** The file read: relative to the folder, or absolute for this machine's. */
  file: string;
  origin: PerfMapOrigin;
  /** Entries read. */
  symbols: number;
}

export interface PerfMapSources {
  /**
   * The folder's copies, by the PID perf recorded (perf-maps.ts's mapsToPlace): collect's snapshots (under target/),
   * and copies beside perf.data.
   */
  copies: readonly { from: string; pid: number }[];
  /** perf.data was recorded on this machine: its /tmp is where perf looked. */
  hostFiles: boolean;
}

export class PerfMaps {
  private readonly tables = new Map<number, Promise<FunctionTable>>();
  /** The maps read, in the order first asked for. */
  readonly used: PerfMapUse[] = [];
  private readonly copies: Map<number, string>;
  private queue: Promise<unknown> = Promise.resolve();
  private bytesRead = 0;

  constructor(
    private readonly folder: OutputFolder,
    private readonly sources: PerfMapSources,
    private readonly warn: Warn,
  ) {
    this.copies = new Map(sources.copies.map(({ from, pid }) => [pid, from]));
  }

  /** The table of process `pid`'s perf map (empty when none is found). */
  table(pid: number): Promise<FunctionTable> {
    let table = this.tables.get(pid);
    if (!table) {
      table = this.queuedRead(pid).catch(() => lookupTable([]));
      this.tables.set(pid, table);
    }
    return table;
  }

  private queuedRead(pid: number): Promise<FunctionTable> {
    // One at a time: each read holds up to a GiB until its table is made.
    const loaded = this.queue.then(() => this.readTable(pid));
    this.queue = loaded.catch(() => undefined);
    return loaded;
  }

  private async readTable(pid: number): Promise<FunctionTable> {
    const budget = Math.min(maxPerfMapBytes, maxTotalPerfMapBytes - this.bytesRead);
    if (budget <= 0) {
      this.warn(
        `perf maps past ${maxTotalPerfMapBytes} bytes in all are not read: process ${pid}'s JIT frames stay unnamed`,
      );
      return lookupTable([]);
    }
    if (this.sources.hostFiles) {
      const path = `/tmp/perf-${pid}.map`;
      const read = await readMachineFile(path, budget, { truncate: true, timeoutMs: 60_000 });
      if (read) {
        if (read.truncated) this.warn(`${path} is larger than ${budget} bytes: only its first bytes are read`);
        return this.use(pid, path, 'machine', read.bytes);
      }
    }
    const inFolder = this.copies.get(pid);
    if (!inFolder) return lookupTable([]);
    const read = await this.folder.read(inFolder, { maxBytes: budget, timeoutMs: 60_000 }).catch(() => undefined);
    if (!read) return lookupTable([]);
    return this.use(pid, inFolder, inFolder.includes('/') ? 'snapshot' : 'folder', read.bytes);
  }

  private use(pid: number, file: string, origin: PerfMapOrigin, bytes: Buffer): FunctionTable {
    this.bytesRead += bytes.length;
    const table = perfMapFunctions(bytes);
    this.used.push({ pid, file, origin, symbols: table.size });
    return table;
  }
}

/**
 * A perf map's ranges as a function table: in columns (starts relative to the lowest, names read from the map's bytes
 * when a lookup returns them), as objects when the ranges span 2^52 or more.
 */
export function perfMapFunctions(bytes: Uint8Array): FunctionTable {
  const { symbols } = readPerfMap(bytes);
  const lowest = symbols.lowest();
  if (lowest < 0) return lookupTable([]);
  const rows = new FunctionRows(symbols.length);
  for (let i = 0; i < symbols.length; i++) {
    const start = symbols.offsetOf(i, lowest);
    const end = start + symbols.sizeOf(i);
    if (end >= maxColumnValue) {
      const objects = symbols
        .toArray()
        .map((s) => ({ start: s.start, end: s.start + s.size, name: s.name, binding: 1 }));
      return lookupTable(sortedAsPerf(objects));
    }
    rows.push(start, end, 1);
  }
  const base = symbols.symbol(lowest).start;
  return columnTable(rows, (row) => symbols.name(row), { functions: rows.count, base });
}

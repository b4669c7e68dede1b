// perf script's text, written from perf.data without perf: takes the reader's events (reader.ts) in perf's order and a
// Symbols source, gives the text `perf script --header --no-inline` prints with its default fields (comm, tid, cpu,
// time, period, event, then one `\t<ip> <sym>+0x<off> (<dso>)` line per frame and a blank line), given to a ScriptSink
// sample by sample as a header line and frame lines: a frame line (ScriptFrame) is made once per mapping and address,
// and the same object is given each time it recurs, so the sink can keep on it what it made of it (the fold's parse,
// the file's bytes).
//
// It keeps what perf's machine keeps (tools/perf/util/machine.c, thread.c, map.c): each thread's comm (`:<tid>` until
// one is known, the parent's after a fork), each process's mappings (a thread shares its leader's; a fork copies its
// parent's; a new mapping replaces what it overlaps), and names each frame the way perf 6.1 does: kernel addresses
// from kallsyms, file mappings by their offset in the file (the address printed is that offset), anonymous executable
// memory as `/tmp/perf-<pid>.map` with the address as is. Frames past perf script's default --max-stack (127) are
// dropped, as perf drops them.
import { context, contextMax, misc } from './format.js';
import type { PerfDataHeader, PerfEvent } from './reader.js';
import type { MmapEvent, SampleEvent } from './records.js';

/** A symbol and the distance of an address into it. */
export interface SymbolHit {
  name: string;
  offset: bigint;
}

/** Where names come from: loaded on demand, so lookups of a file not loaded yet may return a promise. */
export interface ScriptSymbols {
  /** The symbol at a kernel address. */
  kernel(address: bigint): SymbolHit | undefined;
  /** The symbol at `offset` in the file mapped as `mapping` (path and build-id as perf recorded them). */
  file(mapping: Mapping, offset: bigint): SymbolHit | undefined | Promise<SymbolHit | undefined>;
}

export interface Mapping {
  start: bigint;
  end: bigint;
  pgoff: bigint;
  /** The name perf prints: the file's path, `[vdso]`, or `/tmp/perf-<pid>.map` for anonymous code. */
  dso: string;
  /** The path recorded in the mapping record. */
  path: string;
  buildId: string | undefined;
  /** Addresses are printed and looked up as they are (anonymous code), not as file offsets. */
  identity: boolean;
}

/**
 * One distinct frame line: made once per mapping and address, then given for every sample holding it, so a sink can
 * keep on it what it made of the line.
 */
export interface ScriptFrame {
  /** `\t<address> <symbol>+0x<offset> (<dso>)`, without its newline. */
  readonly line: string;
  /** The sink's: undefined until it sets it. */
  memo: unknown;
}

/** Where the text goes. */
export interface ScriptSink {
  /** The `#` header, every line ending in a newline. */
  header(text: string): void | Promise<void>;
  /**
   * One sample: its header line, then `frames[0..count)`, its frame lines, all without their newline (the text is each
   * line followed by a newline, then a blank line). `frames` is reused for the next sample.
   */
  sample(header: string, frames: readonly ScriptFrame[], count: number): void | Promise<void>;
}

export interface ScriptTextOptions {
  /** Keep only the samples of these processes (perf script --pid). Default: all. */
  pids: ReadonlySet<number> | undefined;
  /** Frames kept per sample (perf script --max-stack). Default 127. */
  maxStack: number;
  /** Frame lines cached, all mappings and the kernel together; past it the caches start afresh. Default 2^20. */
  maxCachedLines: number;
}

const kernelStart = 0xffff800000000000n;
const maxStackDefault = 127;
/** Frame lines cached in all (each a line, and the sink's memo of it: a few hundred bytes). */
const maxCachedLinesDefault = 1 << 20;

interface Thread {
  pid: number;
  comm: string;
  /** `comm tid ` as the sample header starts, made for `prefixComm`. */
  prefix: string;
  prefixComm: string | undefined;
}

type Maps = { list: Mapping[] };

export class ScriptTextWriter {
  private readonly threads = new Map<number, Thread>();
  private readonly maps = new Map<number, Maps>();
  private nameWidth = 0;
  private style: ScriptStyle = styleOf(undefined);
  private names: string[] = [];
  private readonly frames: ScriptFrame[] = [];
  private readonly options: ScriptTextOptions;
  private readonly kernelLines = new Map<bigint, ScriptFrame>();
  /** Frames in no mapping: their line depends on the address only. */
  private readonly unmappedLines = new Map<bigint, ScriptFrame>();
  private mappingLines = new WeakMap<Mapping, Map<bigint, ScriptFrame>>();
  /** Lines in the caches above: one bound over all of them, as a recording may map many files. */
  private linesCached = 0;
  samples = 0;

  constructor(
    private readonly symbols: ScriptSymbols,
    private readonly sink: ScriptSink,
    options: Partial<ScriptTextOptions> = {},
  ) {
    this.options = { pids: undefined, maxStack: maxStackDefault, maxCachedLines: maxCachedLinesDefault, ...options };
  }

  /** The `#` header perf script --header prints first (the parts profcpu reads back). */
  async header(header: PerfDataHeader): Promise<void> {
    const f = header.features;
    this.style = styleOf(f.perfVersion);
    this.names = header.attrs.map((attr) => attr.name ?? '[unknown]');
    this.nameWidth = Math.max(0, ...this.names.map((name) => name.length));
    const lines = ['# ========'];
    const fact = (name: string, value: string | number | undefined) => {
      if (value !== undefined) lines.push(`# ${name} : ${value}`);
    };
    fact('hostname', f.hostname);
    fact('os release', f.osRelease);
    fact('perf version', f.perfVersion);
    fact('arch', f.arch);
    fact('nrcpus online', f.nrCpusOnline);
    fact('nrcpus avail', f.nrCpusAvailable);
    fact('cpudesc', f.cpuDesc);
    if (f.cmdline) lines.push(`# cmdline : ${f.cmdline.join(' ')} `);
    for (const name of this.names) lines.push(`# event : name = ${name}, `);
    lines.push('# ========', '#', '');
    await this.sink.header(lines.join('\n'));
  }

  /** Takes the next event; a promise only when it has to be waited for (a symbol table loading, the sink). */
  event(event: PerfEvent): void | Promise<void> {
    switch (event.kind) {
      case 'sample':
        return this.sample(event);
      case 'comm':
        this.thread(event.pid, event.tid).comm = event.comm;
        return;
      case 'fork':
        return this.fork(event.pid, event.tid, event.ppid, event.ptid, event.exec);
      case 'mmap':
        return this.mmap(event);
      case 'exit':
        // perf 6.12 forgets an exited thread: a sample of its tid after the EXIT record has no comm (`:tid`). The
        // process's mappings stay (its other threads hold them in perf), and so does the idle task (tid 0).
        if (!this.style.keepsExited && event.tid > 0) this.threads.delete(event.tid);
        return;
      default:
        return;
    }
  }

  private thread(pid: number, tid: number): Thread {
    let thread = this.threads.get(tid);
    if (!thread || (pid >= 0 && thread.pid < 0)) {
      // perf script registers the idle task as `swapper`; other threads are `:<tid>` until a COMM names them.
      thread = { pid, comm: thread?.comm ?? (tid === 0 ? 'swapper' : `:${tid}`), prefix: '', prefixComm: undefined };
      this.threads.set(tid, thread);
    }
    if (pid !== tid && pid >= 0) this.mapsOf(pid);
    return thread;
  }

  private mapsOf(pid: number): Maps {
    let maps = this.maps.get(pid);
    if (!maps) this.maps.set(pid, (maps = { list: [] }));
    return maps;
  }

  private fork(pid: number, tid: number, ppid: number, ptid: number, synthesized: boolean): void {
    const parent = this.thread(ppid, ptid);
    // A tid reused: the old thread goes.
    this.threads.set(tid, { pid, comm: parent.comm, prefix: '', prefixComm: undefined });
    // A process that ran before the recording gets its own mappings from the records that follow, not its parent's.
    if (pid !== ppid) this.maps.set(pid, { list: synthesized ? [] : [...this.mapsOf(ppid).list] });
  }

  private mmap(event: MmapEvent): void {
    // The kernel's mappings (pid -1) are looked up by address range alone: see frame().
    if (event.pid < 0 || event.cpumode === misc.kernel) return;
    if (event.prot !== undefined && (event.prot & 4) === 0) return;
    const maps = this.mapsOf(event.pid);
    this.thread(event.pid, event.tid);
    const anon = isAnonymous(event.filename);
    const mapping: Mapping = {
      start: event.start,
      end: event.start + event.length,
      pgoff: event.pgoff,
      dso: anon ? `/tmp/perf-${event.pid}.map` : event.filename,
      path: event.filename,
      buildId: event.buildId,
      identity: anon || isNoDso(event.filename),
    };
    // What the new mapping overlaps is cut away, as the kernel did.
    const kept: Mapping[] = [];
    for (const old of maps.list) {
      if (old.end <= mapping.start || old.start >= mapping.end) kept.push(old);
      else {
        if (old.start < mapping.start) kept.push({ ...old, end: mapping.start });
        if (old.end > mapping.end)
          kept.push({
            ...old,
            start: mapping.end,
            pgoff: old.identity ? old.pgoff : old.pgoff + (mapping.end - old.start),
          });
      }
    }
    kept.push(mapping);
    kept.sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
    maps.list = kept;
  }

  private sample(sample: SampleEvent): void | Promise<void> {
    if (this.options.pids && !this.options.pids.has(sample.pid)) return;
    this.samples++;
    const thread = this.thread(sample.pid, sample.tid);
    if (thread.prefixComm !== thread.comm) {
      thread.prefix = `${thread.comm} ${String(sample.tid).padStart(this.style.tidWidth)} `;
      thread.prefixComm = thread.comm;
    }
    let line = thread.prefix;
    if (sample.cpu !== undefined) line += `[${String(sample.cpu).padStart(3, '0')}] `;
    if (sample.time !== undefined) line += `${timestamp(sample.time)}: `;
    line += `${String(sample.period).padStart(10)} `;
    line += `${(this.names[sample.attr] ?? '[unknown]').padStart(this.nameWidth)}: `;
    const maps = this.maps.get(sample.pid < 0 ? -1 : sample.pid)?.list ?? [];
    const chain = sample.callchain ?? BigUint64Array.of(sample.ip);
    // With a callchain, its context markers say where each frame is; a lone ip is where the sample's mode says.
    return this.frameLines(line, chain, 0, 0, sample.callchain ? 0 : sample.cpumode, maps);
  }

  /** The frame lines of `chain` from entry `from` (`made` lines made so far), then the sample to the sink. */
  private frameLines(
    header: string,
    chain: BigUint64Array,
    from: number,
    made: number,
    mode: number,
    maps: Mapping[],
  ): void | Promise<void> {
    let cpumode = mode;
    let frames = made;
    for (let i = from; i < chain.length && frames < this.options.maxStack; i++) {
      const ip = chain[i]!;
      if (ip >= contextMax) {
        // perf reads any other marker as a corrupted chain and prints the sample with no frames at all.
        if (ip !== context.kernel && ip !== context.user && ip !== context.hv) {
          frames = 0;
          break;
        }
        cpumode = ip === context.kernel ? misc.kernel : ip === context.user ? misc.user : misc.hypervisor;
        continue;
      }
      const frame = this.frame(ip, cpumode, maps);
      // A symbol table still loading: the rest waits for it.
      if (frame instanceof Promise)
        return frame.then((line) => {
          this.frames[frames] = line;
          return this.frameLines(header, chain, i + 1, frames + 1, cpumode, maps);
        });
      this.frames[frames++] = frame;
    }
    return this.sink.sample(header, this.frames, frames);
  }

  private frame(ip: bigint, cpumode: number, maps: Mapping[]): ScriptFrame | Promise<ScriptFrame> {
    // perf looks a hypervisor address up nowhere.
    if (cpumode === misc.hypervisor) return frameLine(ip, undefined, '[unknown]');
    if (cpumode === misc.kernel || (cpumode === 0 && ip >= kernelStart)) {
      let line = this.kernelLines.get(ip);
      if (line === undefined) {
        line = frameLine(ip, this.symbols.kernel(ip), '[kernel.kallsyms]');
        this.remember(this.kernelLines, ip, line);
      }
      return line;
    }
    const mapping = findMapping(maps, ip);
    if (!mapping) {
      let line = this.unmappedLines.get(ip);
      if (line === undefined) {
        line = frameLine(ip, undefined, '[unknown]');
        this.remember(this.unmappedLines, ip, line);
      }
      return line;
    }
    // A frame's line depends on its mapping and address only: most frames recur, so each line is made once.
    let lines = this.mappingLines.get(mapping);
    if (!lines) this.mappingLines.set(mapping, (lines = new Map()));
    const known = lines.get(ip);
    if (known !== undefined) return known;
    const address = mapping.identity ? ip : ip - mapping.start + mapping.pgoff;
    const found = this.symbols.file(mapping, address);
    const make = (hit: SymbolHit | undefined) => {
      const line = frameLine(this.style.fileOffsets ? address : ip, hit, mapping.dso);
      this.remember(lines, ip, line);
      return line;
    };
    return found instanceof Promise ? found.then(make) : make(found);
  }

  /** Caches a frame line, within a bound: a cache grown past it starts afresh. */
  private remember(cache: Map<bigint, ScriptFrame>, ip: bigint, line: ScriptFrame): void {
    if (this.linesCached >= this.options.maxCachedLines) {
      // `cache` may be a mapping's dropped here: the line goes into it all the same, and it is dropped after.
      this.kernelLines.clear();
      this.unmappedLines.clear();
      this.mappingLines = new WeakMap();
      this.linesCached = 0;
    }
    cache.set(ip, line);
    this.linesCached++;
  }
}

/** `seconds.micros` of a time in nanoseconds, as perf prints it. */
function timestamp(time: bigint): string {
  let seconds: number | bigint;
  let micros: number | bigint;
  if (time <= maxSafe) {
    const ns = Number(time);
    seconds = Math.floor(ns / 1e9);
    micros = Math.floor((ns % 1e9) / 1000);
  } else {
    seconds = time / 1_000_000_000n;
    micros = (time % 1_000_000_000n) / 1000n;
  }
  return `${String(seconds).padStart(5)}.${String(micros).padStart(6, '0')}`;
}

const maxSafe = BigInt(Number.MAX_SAFE_INTEGER);

/**
 * What changed in perf script's text between the versions checked (6.1.187 and 6.12.117): 6.12 pads the tid to 7
 * columns (6.1: 5), prints a file frame's address as it was in memory (6.1: its offset in the file) and forgets an
 * exited thread (6.1 keeps its comm for samples after its EXIT record). A recording
 * reads as the perf that wrote it would print it; versions between the two are taken as 6.12.
 */
interface ScriptStyle {
  tidWidth: number;
  fileOffsets: boolean;
  /** An exited thread keeps its comm (6.1); 6.12 removes it from its machine. */
  keepsExited: boolean;
}

function styleOf(perfVersion: string | undefined): ScriptStyle {
  const m = /^(\d+)\.(\d+)/.exec(perfVersion ?? '');
  const older = !m || Number(m[1]) < 6 || (Number(m[1]) === 6 && Number(m[2]) <= 1);
  return older
    ? { tidWidth: 5, fileOffsets: true, keepsExited: true }
    : { tidWidth: 7, fileOffsets: false, keepsExited: false };
}

function frameLine(address: bigint, hit: SymbolHit | undefined, dso: string): ScriptFrame {
  const name = hit ? `${hit.name}+0x${hit.offset.toString(16)}` : '[unknown]';
  return { line: `\t${address.toString(16).padStart(16)} ${name} (${dso})`, memo: undefined };
}

function findMapping(list: Mapping[], ip: bigint): Mapping | undefined {
  let lo = 0;
  let hi = list.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const m = list[mid]!;
    if (ip < m.start) hi = mid - 1;
    else if (ip >= m.end) lo = mid + 1;
    else return m;
  }
  return undefined;
}

/** perf's is_anon_memory: code there is named from /tmp/perf-<pid>.map. */
function isAnonymous(path: string): boolean {
  return path === '//anon' || path.startsWith('/dev/zero') || path.startsWith('/anon_hugepage');
}

/** perf's is_no_dso_memory: addresses used as they are. */
function isNoDso(path: string): boolean {
  return path.startsWith('[stack') || path.startsWith('/SYSV') || path === '[heap]';
}

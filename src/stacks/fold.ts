// The fold stage: `perf script` text (bytes, in chunks of any size) to folded stacks. Pure and streaming: no files,
// no processes; memory grows with the number of distinct frames and stacks, not with the input. Tolerant: lines it
// cannot read are counted by kind (warned once each) and never throw.
//
// Per line the work is byte scanning: a frame line is looked up by the bytes of its `symbol (dso)` text in a cache
// of frame ids, so naming rules (frame-name.ts) run once per distinct frame, and a sample is an array of ids until
// its stack is first seen (stack-table.ts).
import { ignoreWarnings, SkipCounter, sumCounts, type Warn } from '../diagnostics.js';
import { BytesMap } from './bytes-map.js';
import { nameFrameLine, oneLine, type FrameNamingOptions, type FrameResolver } from './frame-name.js';
import { addStack, type FoldedStacks } from './folded.js';
import {
  isSpace,
  matchEvent,
  matchEventAfterTime,
  matchFrameStart,
  matchHeader,
  splitDso,
  trimEnd,
  type EventFields,
  type FrameFields,
  type HeaderFields,
} from './perf-script-line.js';
import {
  addNamingQuality,
  emptyNamingQuality,
  FrameTable,
  StackTable,
  type AddressedStack,
  type NamingQuality,
  type StackEntry,
} from './stack-table.js';

export type { FrameResolver } from './frame-name.js';
export type { AddressedStack, NamingQuality } from './stack-table.js';

export interface FoldOptions {
  /**
   * Reproduce stackcollapse-perf.pl (FlameGraph) exactly: its name tidying (cut at `(`, quotes dropped, Java `L`
   * prefix), `[unknown]` becoming `[dso-basename]`, annotations only when asked and by its dso rules, a 2-byte
   * minimum comm, weights by period. Default false: .NET-aware readable names, kinds annotated.
   * The resolver is not consulted with compat. Both modes read CRLF as LF (the script cannot end a sample on a `\r` line) and drop a last sample that no
   * blank line ends (the script never counts it).
   */
  compat: boolean;
  /** Root frame `comm-pid` (`comm-?` when perf printed no pid). Default false. */
  includePid: boolean;
  /** Root frame `comm-pid/tid`. Default false. */
  includeTid: boolean;
  /** Suffix kernel frames with `_[k]`. Default undefined: on, except with `compat` (its `--kernel`). */
  annotateKernel: boolean | undefined;
  /** Suffix JIT and ReadyToRun frames with `_[j]`. Default undefined: on, except with `compat` (its `--jit`). */
  annotateJit: boolean | undefined;
  /** Name unnamed frames with their address, `[libfoo.so <7f01…>]`. Default false. */
  addrs: boolean;
  /** Keep only samples of this event (`cpu-clock`); '' keeps the first event seen. Default ''. */
  eventFilter: string;
  /** 'samples': each sample counts 1; 'period': its period (ns for cpu-clock), 1 when absent. Default 'samples'. */
  weight: 'samples' | 'period';
  /** Managed frames: prefix the assembly, `System.Private.CoreLib!Type::Method`. Default false. */
  keepModule: boolean;
  /** Managed and native frames: keep the argument list. Default false. */
  keepArguments: boolean;
  /** Managed frames: keep the tier suffix, `[OptimizedTier1]`. Default false. */
  keepTier: boolean;
  /**
   * Keep each unnamed frame in a native file apart by its address (`addressed` in the result), for a profile that
   * carries addresses to whoever names them later (pprof); the folded stacks are the same. Default false.
   */
  keepAddresses: boolean;
}

/** A root frame's name as the fold writes it (a thread's comm, or comm-pid/tid): spaces become underscores. */
export function rootFrameName(name: string): string {
  return name.replaceAll(' ', '_');
}

export const defaultFoldOptions: Readonly<FoldOptions> = Object.freeze({
  compat: false,
  includePid: false,
  includeTid: false,
  annotateKernel: undefined,
  annotateJit: undefined,
  addrs: false,
  eventFilter: '',
  weight: 'samples',
  keepModule: false,
  keepArguments: false,
  keepTier: false,
  keepAddresses: false,
});

export interface FoldResult {
  stacks: FoldedStacks;
  /** Sample headers read. */
  samples: number;
  /** Samples folded into `stacks` (not filtered out, not cut short). */
  keptSamples: number;
  /** Sum of the kept samples' weights. */
  weight: number;
  /** Event names seen, in order of first appearance. */
  events: string[];
  /** Samples read of each event seen (all of them, kept or not). */
  eventSamples: Record<string, number>;
  /** The event whose samples were folded: `eventFilter`, else the first seen (undefined: none named). */
  foldedEvent: string | undefined;
  /** The times of the first and last samples read (all events), in seconds, when the text has times. */
  times: { first: number; last: number } | undefined;
  /** What was skipped, by kind. */
  skipped: Record<string, number>;
  quality: NamingQuality;
  /** The native file (its name) of each native frame, by folded frame name, as the first sample naming it said. */
  frameFiles: ReadonlyMap<string, string>;
  /**
   * With keepAddresses: the weight of the stacks through unnamed native frames, by those frames' addresses (part of
   * `stacks` already, told apart). Empty otherwise.
   */
  addressed: readonly AddressedStack[];
}

/** Lines longer than this are dropped rather than buffered (binary garbage must not grow memory). */
const MAX_LINE = 1 << 20;
const HASH = 35;
const TAB = 9;
const SPACE = 32;
/** `# event : name = <name>, ..., type = <type>, ...`: perf script --header's line for each event. */
const eventHeader = /^# event : name = (.*?), .*?\btype = (\d+)\b/;
/** perf_event_attr.type of tracepoints: what follows their event name is the tracepoint's fields, never a frame. */
const tracepointType = 2;
/** Distinct lines given to frameText() whose parse is kept, all processes together. */
const MAX_TEXT_LINES = 1 << 20;
const RECENT_SLOTS = 1 << 14;
/** Distinct event names kept (perf records a handful; each sample header compares its name with them). */
const MAX_EVENTS = 256;
const UNKNOWN_SYM = Buffer.from('[unknown]');
const NEWLINE = Buffer.from('\n');
const NO_FRAMES = new Int32Array(0);
/** Cached for lines that are not frames, so that they are counted each time they appear. */
const NOT_A_FRAME = new Int32Array(0);

const enum State {
  Between,
  InSample,
  Filtered,
}

interface Root {
  id: number;
  pid: number | undefined;
  java: boolean;
  /** stackcollapse-perf.pl drops samples whose root is `0` (Perl false). */
  falsy: boolean;
}

/** What StackFolder.frameText() keeps on a caller's object for one line. */
export interface FrameTextMemo {
  foldKey?: number;
  foldIds?: Int32Array;
}

/** What StackFolder.stackText() keeps on a caller's object for one sequence of lines. */
export interface StackTextMemo {
  foldKey?: number;
  /** Every line's ids, leaf first. */
  foldIds?: Int32Array;
  /** The root frame the last sample of these lines had, and the stack it made. */
  foldRoot?: number;
  foldStack?: StackEntry;
}

/** Streaming folder: write() chunks as they come, end() once for the result. Never throws on bad input. */
export class StackFolder {
  private readonly options: FoldOptions;
  private readonly naming: FrameNamingOptions;
  private readonly skips: SkipCounter;
  /** Counts what the caller asked to skip (samples of other events than the one named): no warning. */
  private readonly expectedSkips = new SkipCounter();
  private readonly warnings: [kind: string, message: string][] = [];
  private readonly frames = new FrameTable();
  private readonly stacks = new StackTable();
  private readonly lineCache = new BytesMap<Int32Array>();
  /** Lines given to frameText(), by the salt of their sample (see frameText), then by their text. */
  private readonly textLines = new Map<number, Map<string, Int32Array>>();
  private textLinesKept = 0;
  /** By a hash of the address: the lineCache entry last seen there. */
  private readonly recent = new Int32Array(RECENT_SLOTS).fill(-1);
  private readonly roots = new BytesMap<Root>();
  private readonly events: string[] = [];
  private readonly eventBytes: Buffer[] = [];
  /** Samples read per event, by its index in `events`. */
  private readonly eventCounts: number[] = [];
  /** Events the header says are tracepoints. */
  private readonly tracepoints = new Set<string>();
  private readonly header: HeaderFields = { commEnd: 0, firstStart: 0, firstEnd: 0, secondStart: -1, secondEnd: 0 };
  private readonly event: EventFields = { eventStart: -1, eventEnd: 0, periodStart: -1, periodEnd: 0 };
  private readonly frame: FrameFields = { ipStart: 0, ipEnd: 0, symStart: 0 };
  private eventFilter: string;
  private carry: Buffer | undefined;
  private discarding = false;
  private state = State.Between;
  private root: Root | undefined;
  private leafFirst = new Int32Array(256);
  private depth = 0;
  private sampleWeight = 1;
  /** The current sample's frames came from this memo of stackText(), when nothing else was pushed yet. */
  private sampleStack: StackTextMemo | undefined;
  private parsed = 0;
  private firstTime: number | undefined;
  private lastTime = 0;
  private kept = 0;
  private totalWeight = 0;
  private ended = false;

  constructor(
    options: Partial<FoldOptions> = {},
    warn: Warn = ignoreWarnings,
    private readonly resolver?: FrameResolver,
  ) {
    this.options = { ...defaultFoldOptions, ...options };
    const { compat } = this.options;
    this.naming = {
      compat,
      annotateKernel: this.options.annotateKernel ?? !compat,
      annotateJit: this.options.annotateJit ?? !compat,
      addrs: this.options.addrs,
      keepNativeArguments: this.options.keepArguments,
      managed: {
        keepModule: this.options.keepModule,
        keepArguments: this.options.keepArguments,
        keepTier: this.options.keepTier,
      },
    };
    this.eventFilter = this.options.eventFilter;
    this.skips = new SkipCounter(warn);
  }

  write(chunk: Uint8Array): void {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    let start = 0;
    if (this.carry !== undefined || this.discarding) {
      const nl = buf.indexOf(10);
      if (nl < 0) {
        this.hold(buf);
        return;
      }
      this.hold(buf.subarray(0, nl));
      const line = this.carry;
      this.carry = undefined;
      if (this.discarding) this.discarding = false;
      else if (line !== undefined) this.line(line, 0, line.length);
      start = nl + 1;
    }
    for (;;) {
      const nl = buf.indexOf(10, start);
      if (nl < 0) break;
      this.line(buf, start, nl);
      start = nl + 1;
    }
    if (start < buf.length) this.hold(buf.subarray(start));
  }

  /**
   * Bytes [start, end) of `buf`, one line holding no newline, folded as write() folds them followed by a newline:
   * for a caller that has the line whole (the built-in engine's sample headers, and its blank lines as an empty range),
   * without making a chunk of it.
   */
  writeLine(buf: Buffer, start: number, end: number): void {
    if (this.carry !== undefined || this.discarding) {
      this.write(buf.subarray(start, end));
      this.write(NEWLINE);
    } else this.line(buf, start, end);
  }

  end(): FoldResult {
    if (!this.ended) {
      this.ended = true;
      const line = this.carry;
      this.carry = undefined;
      if (line !== undefined && !this.discarding) this.line(line, 0, line.length);
      if (this.state === State.InSample) {
        this.skip(
          'truncated-sample',
          'the input ends inside a sample (no blank line after its last frame): dropped it, as it may lack frames',
        );
      }
      this.state = State.Between;
    }
    const { stacks, addressed } = this.stacks.folded(this.frames);
    return {
      stacks,
      samples: this.parsed,
      keptSamples: this.kept,
      weight: this.totalWeight,
      events: [...this.events],
      eventSamples: Object.fromEntries(this.events.map((event, i) => [event, this.eventCounts[i] ?? 0])),
      foldedEvent: this.eventFilter || undefined,
      times: this.firstTime === undefined ? undefined : { first: this.firstTime, last: this.lastTime },
      skipped: sumCounts([this.skips.counts, this.expectedSkips.counts]),
      quality: this.stacks.quality(this.frames),
      frameFiles: this.frames.files(),
      addressed,
    };
  }

  /** The warnings given so far, with the kind of skip each is about (one per kind), in order. */
  firstWarnings(): readonly (readonly [kind: string, message: string])[] {
    return this.warnings;
  }

  private skip(kind: string, message: string): void {
    if (!this.skips.counts.has(kind)) this.warnings.push([kind, message]);
    this.skips.add(kind, message);
  }

  /** Keeps a partial line for the next chunk, copying it (the caller may reuse its buffer). */
  private hold(part: Buffer): void {
    if (this.discarding) return;
    const length = (this.carry?.length ?? 0) + part.length;
    if (length > MAX_LINE) {
      this.carry = undefined;
      this.discarding = true;
      this.skip('overlong-line', `skipped a line longer than ${MAX_LINE} bytes (not perf script text?)`);
      return;
    }
    this.carry = this.carry === undefined ? Buffer.from(part) : Buffer.concat([this.carry, part], length);
  }

  private line(buf: Buffer, start: number, end: number): void {
    if (end > start && buf[end - 1] === 13) end--;
    if (start === end) {
      this.endSample();
      return;
    }
    const first = buf[start]!;
    const { compat } = this.options;
    if (first === HASH) {
      if (!compat) this.commentLine(buf, start, end);
      return;
    }
    // A sample perf printed on one line (recorded without call graphs): its comm is padded to 16 columns.
    if (first === SPACE && !compat && this.state !== State.InSample && this.oneLineSample(buf, start, end)) return;
    if (isSpace(first)) {
      if (trimEnd(buf, start, end) === start) {
        if (compat) this.unrecognized(buf, start, end);
        else this.endSample();
      } else this.frameLine(buf, start, end);
    } else if (matchHeader(buf, start, end, compat, this.header)) {
      this.beginSample(buf, start, end);
    } else if (compat) {
      // stackcollapse-perf.pl tries its frame rule on every line that is not a header.
      this.frameLine(buf, start, end);
    } else this.unrecognized(buf, start, end);
  }

  /** perf script --header's `# event : name = ...` lines: which events are tracepoints. */
  private commentLine(buf: Buffer, start: number, end: number): void {
    if (end - start < 20 || buf[start + 2] !== 101) return;
    const m = eventHeader.exec(buf.toString('utf8', start, Math.min(end, start + 4096)));
    if (m && Number(m[2]) === tracepointType) this.tracepoints.add(m[1]!);
  }

  /**
   * A sample's header: its event (kept or filtered out), root frame and weight. Gives the offset of what follows the
   * event on the line (a tracepoint's fields, a one-line sample's frame), -1 when that is not known. `matched`: what
   * matchEventAfterTime gave for the line, when the caller matched it already.
   */
  private beginSample(buf: Buffer, start: number, end: number, matched?: number): number {
    const { compat } = this.options;
    this.parsed++;
    this.sampleStack = undefined;
    if (!compat && this.state === State.InSample) {
      this.skip('unterminated-sample', 'a sample header followed frames without a blank line: dropped that sample');
      this.depth = 0;
    }
    // stackcollapse-perf.pl reads the event from the line's end; perf prints it after the time (and a tracepoint's
    // fields after it), which is where it is read otherwise, when the line has a time.
    const h = this.header;
    const rest =
      matched ??
      (compat ? -1 : matchEventAfterTime(buf, h.secondStart >= 0 ? h.secondEnd : h.firstEnd, end, this.event));
    if (rest < 0) matchEvent(buf, start, end, this.event);
    else if (this.event.timeStart! >= 0) {
      this.lastTime = parseTime(buf, this.event.timeStart!, this.event.timeEnd!);
      this.firstTime ??= this.lastTime;
    }
    let period = -1;
    if (this.event.eventStart >= 0) {
      const index = this.eventIndex(buf, this.event.eventStart, this.event.eventEnd);
      this.eventCounts[index] = (this.eventCounts[index] ?? 0) + 1;
      const name = this.events[index]!;
      if (this.eventFilter === '') this.eventFilter = name;
      if (name !== this.eventFilter) {
        if (this.options.eventFilter !== '') this.expectedSkips.add('other-event');
        else this.skip('other-event', otherEventMessage(this.eventFilter, name));
        // stackcollapse-perf.pl leaves a sample in progress untouched here.
        if (!compat || this.state !== State.InSample) {
          this.state = State.Filtered;
          this.depth = 0;
        }
        return rest;
      }
      if (this.event.periodStart >= 0) period = parseDigits(buf, this.event.periodStart, this.event.periodEnd);
    }
    const root = this.rootOf(buf, start);
    this.root = root;
    this.sampleWeight = (compat || this.options.weight === 'period') && period > 0 ? period : 1;
    this.state = root.falsy ? State.Filtered : State.InSample;
    return rest;
  }

  /**
   * A line that may be a whole sample, as perf prints one without a callchain: `<comm padded to 16> tid time: period
   * event:  <ip> <sym> (<dso>)` (a tracepoint's fields instead of the frame). False when it is no such line.
   */
  private oneLineSample(buf: Buffer, start: number, end: number): boolean {
    let from = start;
    while (from < end && buf[from] === SPACE) from++;
    if (from >= end || !matchHeader(buf, from, end, false, this.header)) return false;
    const h = this.header;
    const rest = matchEventAfterTime(buf, h.secondStart >= 0 ? h.secondEnd : h.firstEnd, end, this.event);
    if (rest < 0) return false;
    this.beginSample(buf, from, end, rest);
    if (this.state !== State.InSample) {
      // Filtered out: the next line starts afresh.
      this.state = State.Between;
      return true;
    }
    // A sample kept is of the event folded.
    if (rest < end && !this.tracepoints.has(this.eventFilter)) this.frameLine(buf, rest, end);
    if (this.state === State.InSample) this.endSample();
    return true;
  }

  /** The event's index in `events`; past maxEvents distinct names (not perf's text), the last one stands for them. */
  private eventIndex(buf: Buffer, start: number, end: number): number {
    for (let i = 0; i < this.eventBytes.length; i++) {
      const known = this.eventBytes[i]!;
      if (sameBytes(known, buf, start, end)) return i;
    }
    if (this.events.length === MAX_EVENTS) return MAX_EVENTS - 1;
    const name = this.events.length === MAX_EVENTS - 1 ? '[more events]' : buf.toString('utf8', start, end);
    this.eventBytes.push(Buffer.from(buf.subarray(start, end)));
    this.events.push(name);
    return this.events.length - 1;
  }

  private rootOf(buf: Buffer, start: number): Root {
    const h = this.header;
    const keyEnd = h.secondStart >= 0 ? h.secondEnd : h.firstEnd;
    let root = this.roots.get(buf, start, keyEnd, 0);
    if (root !== undefined) return root;
    const comm = buf.toString('utf8', start, h.commEnd);
    const first = buf.toString('latin1', h.firstStart, h.firstEnd);
    const second = h.secondStart >= 0 ? buf.toString('latin1', h.secondStart, h.secondEnd) : '';
    // With one number perf printed the tid; Perl also reads a tid of "0" as missing.
    const [pid, tid] = second !== '' && second !== '0' ? [first, second] : ['?', first];
    let name = comm;
    if (this.options.includeTid) name = `${comm}-${pid}/${tid}`;
    else if (this.options.includePid) name = `${comm}-${pid}`;
    name = rootFrameName(name);
    root = {
      id: this.frames.intern(name, undefined, false),
      pid: pid === '?' ? undefined : Number(pid),
      java: name.startsWith('java'),
      falsy: this.options.compat && name === '0',
    };
    this.roots.set(buf, start, keyEnd, 0, root);
    return root;
  }

  private frameLine(buf: Buffer, start: number, end: number): void {
    if (this.state !== State.InSample) {
      this.frameOutsideSample();
      return;
    }
    const f = this.frame;
    if (!matchFrameStart(buf, start, end, this.options.compat, f)) {
      this.unrecognized(buf, start, end);
      return;
    }
    const root = this.root!;
    const textEnd = trimEnd(buf, f.symStart, end);
    const unnamed = isUnknownSymbol(buf, f.symStart, textEnd);
    // An unnamed frame's name (and the resolver's answer) depends on its address, and its process.
    const keyStart = unnamed ? f.ipStart : f.symStart;
    // Salt: names in java processes differ in compat mode; a resolver's answer depends on the pid.
    const salt =
      (root.java && this.options.compat ? 1 : 0) | (unnamed && this.resolver ? ((root.pid ?? -1) + 1) * 2 : 0);
    // Most lines repeat the text last seen at their address: check that entry before hashing the whole text.
    let a = salt;
    for (let i = f.ipStart; i < f.ipEnd; i++) a = Math.imul(a ^ buf[i]!, 16777619);
    const slot = a & (RECENT_SLOTS - 1);
    const recent = this.recent[slot]!;
    let ids: Int32Array | undefined;
    if (recent >= 0 && this.lineCache.matches(recent, buf, keyStart, textEnd, salt)) {
      ids = this.lineCache.valueAt(recent);
    } else {
      ids = this.lineCache.get(buf, keyStart, textEnd, salt);
      if (ids === undefined) {
        ids = this.internLine(buf, f, textEnd, root);
        this.lineCache.set(buf, keyStart, textEnd, salt, ids);
      }
      this.recent[slot] = this.lineCache.lastIndex;
    }
    if (ids === NOT_A_FRAME) {
      this.unrecognized(buf, start, end);
      return;
    }
    this.push(ids);
  }

  /**
   * One frame line of the current sample given whole, as a string with no line break or carriage return, instead of
   * inside write()'s chunks: folded as write() folds the same line. For a caller that makes each distinct line once and
   * passes it again for every sample holding it (the built-in engine): the line is parsed once per distinct text (and
   * per process, as unnamed frames are named by process), then only looked up; with `memo`, an object the caller
   * keeps for the line, the parse for the last process is kept on it, and not even looked up the next time.
   */
  frameText(line: string, memo?: FrameTextMemo): void {
    this.textLine(line, memo);
  }

  /**
   * All the frame lines of the current sample, given as frameText() takes them (`memos[i]` for `lines[i]`), folded as
   * frameText() folds them one by one. For a caller that passes the same lines again for every sample holding that
   * stack, with `stack`, an object it keeps for them and gives this folder only: the lines' parse for the last process
   * is kept on it, and the stack they made with the last root frame, so that the next such sample is counted without
   * walking its frames.
   */
  stackText(lines: readonly string[], memos: readonly FrameTextMemo[], stack: StackTextMemo): void {
    if (this.state !== State.InSample || this.depth !== 0) {
      for (let i = 0; i < lines.length; i++) this.textLine(lines[i]!, memos[i]);
      return;
    }
    const key = this.textKey(this.root!);
    if (stack.foldIds !== undefined && stack.foldKey === key) {
      this.push(stack.foldIds);
      this.sampleStack = stack;
      return;
    }
    let whole = true;
    for (let i = 0; i < lines.length; i++) if (!this.textLine(lines[i]!, memos[i])) whole = false;
    // Kept only when every line was a frame of this sample: a line that is not is counted (or ends the sample) again.
    if (!whole || this.state !== State.InSample) return;
    stack.foldKey = key;
    stack.foldIds = this.leafFirst.slice(0, this.depth);
    stack.foldRoot = undefined;
    stack.foldStack = undefined;
    this.sampleStack = stack;
  }

  /** The salt of the current sample's frame lines: see frameLine (here for any line, named or not). */
  private textKey(root: Root): number {
    return (root.java && this.options.compat ? 1 : 0) | (this.resolver ? ((root.pid ?? -1) + 1) * 2 : 0);
  }

  /** frameText(); true when the line was a frame of the current sample, folded as such. */
  private textLine(line: string, memo: FrameTextMemo | undefined): boolean {
    if (this.state !== State.InSample || line.charCodeAt(0) !== TAB) {
      const buf = Buffer.from(line);
      this.line(buf, 0, buf.length);
      return false;
    }
    const key = this.textKey(this.root!);
    if (memo?.foldIds !== undefined && memo.foldKey === key) {
      this.push(memo.foldIds);
      return true;
    }
    let byText = this.textLines.get(key);
    if (!byText) this.textLines.set(key, (byText = new Map()));
    let ids = byText.get(line);
    if (ids === undefined) {
      const buf = Buffer.from(line);
      if (trimEnd(buf, 0, buf.length) === 0) {
        this.line(buf, 0, buf.length);
        return false;
      }
      const f = this.frame;
      ids = matchFrameStart(buf, 0, buf.length, this.options.compat, f)
        ? this.internLine(buf, f, trimEnd(buf, f.symStart, buf.length), this.root!)
        : NOT_A_FRAME;
      if (ids === NOT_A_FRAME) {
        this.unrecognized(buf, 0, buf.length);
        return false;
      }
      // Bounded over all processes: past the bound, the kept parses start afresh.
      if (this.textLinesKept >= MAX_TEXT_LINES) {
        this.textLines.clear();
        this.textLines.set(key, (byText = new Map()));
        this.textLinesKept = 0;
      }
      byText.set(line, ids);
      this.textLinesKept++;
    }
    if (memo) {
      memo.foldKey = key;
      memo.foldIds = ids;
    }
    this.push(ids);
    return true;
  }

  private push(ids: Int32Array): void {
    if (this.depth + ids.length > this.leafFirst.length) {
      const grown = new Int32Array(Math.max(this.leafFirst.length * 2, this.depth + ids.length));
      grown.set(this.leafFirst);
      this.leafFirst = grown;
    }
    for (let i = 0; i < ids.length; i++) this.leafFirst[this.depth++] = ids[i]!;
  }

  private frameOutsideSample(): void {
    if (this.state === State.Between) this.skip('frame-outside-sample', 'skipped frame lines outside a sample');
  }

  private internLine(buf: Buffer, f: FrameFields, textEnd: number, root: Root): Int32Array {
    const { compat } = this.options;
    const split = splitDso(buf, f.symStart, textEnd, compat);
    if (split === undefined && compat) return NOT_A_FRAME;
    const named = nameFrameLine(
      {
        ip: buf.toString('latin1', f.ipStart, f.ipEnd),
        sym: buf.toString('utf8', f.symStart, split ? split[0] : textEnd),
        dso: split ? buf.toString('utf8', split[1], split[2]) : undefined,
        pid: root.pid,
        javaComm: root.java,
      },
      this.naming,
      this.resolver,
    );
    if (named.length === 0) return NO_FRAMES;
    // Leaf first: in `outer->inlined` the inlined frame is nearer the leaf.
    const ids = new Int32Array(named.length);
    for (let i = 0; i < named.length; i++) {
      const frame = named[named.length - 1 - i]!;
      const address = this.options.keepAddresses ? frame.ip : undefined;
      ids[i] = this.frames.intern(frame.name, frame.kind, frame.coreclr, frame.library, frame.file, address);
    }
    return ids;
  }

  private endSample(): void {
    if (this.state === State.InSample) {
      const root = this.root!.id;
      // A sample holding only the frames of a stackText() memo, nothing pushed after them (which would make it deeper).
      const memo = this.sampleStack?.foldIds?.length === this.depth ? this.sampleStack : undefined;
      if (memo?.foldStack !== undefined && memo.foldRoot === root) this.stacks.count(memo.foldStack, this.sampleWeight);
      else {
        const stack = this.stacks.add(root, this.leafFirst, this.depth, this.sampleWeight);
        if (memo) {
          memo.foldRoot = root;
          memo.foldStack = stack;
        }
      }
      this.kept++;
      this.totalWeight += this.sampleWeight;
    }
    this.sampleStack = undefined;
    this.state = State.Between;
    this.depth = 0;
  }

  private unrecognized(buf: Buffer, start: number, end: number): void {
    const text = oneLine(buf.toString('utf8', start, Math.min(end, start + 80)).trim());
    this.skip('unrecognized-line', `skipped lines that are neither sample headers nor frames, e.g. '${text}'`);
  }
}

/** Folds a whole stream (e.g. `perf script` stdout or a file's read stream). */
export async function foldStream(
  source: AsyncIterable<Uint8Array>,
  options?: Partial<FoldOptions>,
  warn?: Warn,
  resolver?: FrameResolver,
): Promise<FoldResult> {
  const folder = new StackFolder(options, warn, resolver);
  for await (const chunk of source) folder.write(chunk);
  return folder.end();
}

/** The warning given when samples of events other than the first one seen are skipped. */
export function otherEventMessage(kept: string, other: string): string {
  return `keeping only samples of event '${kept}' (the first seen); samples of '${other}' and other events are skipped`;
}

/** Merges the results of consecutive parts of one input, in order: what folding the whole input would give. */
export function mergeFoldResults(results: readonly FoldResult[]): FoldResult {
  const stacks: FoldedStacks = new Map();
  const events: string[] = [];
  const eventSamples: Record<string, number> = {};
  const quality = emptyNamingQuality();
  const frameFiles = new Map<string, string>();
  const addressed: AddressedStack[] = [];
  let [samples, keptSamples, weight] = [0, 0, 0];
  for (const r of results) {
    for (const [frame, file] of r.frameFiles) if (!frameFiles.has(frame)) frameFiles.set(frame, file);
    for (const [stack, w] of r.stacks) addStack(stacks, stack, w);
    for (const part of r.addressed) addressed.push(part);
    samples += r.samples;
    keptSamples += r.keptSamples;
    weight += r.weight;
    for (const event of r.events) if (!events.includes(event)) events.push(event);
    for (const [event, n] of Object.entries(r.eventSamples)) eventSamples[event] = (eventSamples[event] ?? 0) + n;
    addNamingQuality(quality, r.quality);
  }
  const skipped = sumCounts(results.map((r) => Object.entries(r.skipped)));
  const foldedEvent = results.find((r) => r.foldedEvent !== undefined)?.foldedEvent;
  const timed = results.filter((r) => r.times !== undefined).map((r) => r.times!);
  const times = timed.length > 0 ? { first: timed[0]!.first, last: timed[timed.length - 1]!.last } : undefined;
  return {
    stacks,
    samples,
    keptSamples,
    weight,
    events,
    eventSamples,
    foldedEvent,
    times,
    skipped,
    quality,
    frameFiles,
    addressed,
  };
}

/** `seconds.fraction` in seconds (microseconds as perf prints them are exact to the µs here). */
function parseTime(buf: Buffer, start: number, end: number): number {
  let whole = 0;
  let i = start;
  for (; i < end && buf[i] !== 46; i++) whole = whole * 10 + (buf[i]! - 48);
  let fraction = 0;
  let scale = 1;
  for (i++; i < end; i++) {
    fraction = fraction * 10 + (buf[i]! - 48);
    scale *= 10;
  }
  return whole + fraction / scale;
}

function parseDigits(buf: Buffer, start: number, end: number): number {
  let n = 0;
  for (let i = start; i < end; i++) n = n * 10 + (buf[i]! - 48);
  return n;
}

/** Whether `known` holds bytes [start, end) of `buf`: for short texts, quicker than a call to Buffer.compare. */
function sameBytes(known: Buffer, buf: Buffer, start: number, end: number): boolean {
  if (known.length !== end - start) return false;
  for (let i = 0; i < known.length; i++) if (known[i] !== buf[start + i]) return false;
  return true;
}

function isUnknownSymbol(buf: Buffer, start: number, end: number): boolean {
  if (end - start < UNKNOWN_SYM.length) return false;
  for (let i = 0; i < UNKNOWN_SYM.length; i++) if (buf[start + i] !== UNKNOWN_SYM[i]) return false;
  const next = start + UNKNOWN_SYM.length;
  return next === end || buf[next] === 32 || buf[next] === 43;
}

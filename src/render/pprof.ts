// Folded stacks to a pprof profile (github.com/google/pprof, proto/profile.proto), gzipped: the format Grafana
// Pyroscope, Parca, Google's pprof and Datadog read. Takes FoldedStacks and PprofOptions; gives the bytes of
// `profile.pb.gz`. Deterministic: stacks in sorted order, strings, functions, locations and mappings numbered in order
// of first use.
//
// How folded stacks map onto pprof's model:
// - each distinct stack is one Sample, its weight times each sample type's factor its values (rounded to integers);
// - the root frame, the thread's name, is the sample's `thread_name` label rather than a frame (pprof's frames are code);
// - each frame is a Function whose `name` is the name the flame graphs show (annotation dropped) and whose
//   `system_name` is the folded frame itself, so that pprof back to folded stacks gives the same text;
// - a frame inlined into its caller (`_[i]`) is a Line of its caller's Location, innermost first, as pprof keeps
//   inlining;
// - what kind of code a frame is shows in its Location's Mapping: `[kernel.kallsyms]` for the kernel, `[managed]`
//   for .NET's JIT-compiled and precompiled code, the native file (with its build-id) for native code whose file is
//   known;
// - a frame profcpu could not name in a native file (`[libcoreclr.so]` without its debug file) keeps its address when
//   the fold kept it (`addressed`) and the target's mappings place it (`locate`): its Location has that address, its
//   Mapping the file's place in the target's memory and `has_functions` false, so that a backend holding the debug
//   file (found by the build-id) names it; its line still names it as the flame graphs do.
import { gzipSync } from 'node:zlib';
import type { AddressedStack } from '../stacks/stack-table.js';
import type { FoldedStacks } from '../stacks/folded.js';
import { describeFrame } from './frames.js';
import { ProtoWriter } from './protobuf.js';

/** One of a sample's values: what it measures, and how many of its unit one unit of folded weight stands for. */
export interface PprofSampleType {
  type: string;
  unit: string;
  /** Value = folded weight × this. */
  perWeight: number;
}

export interface PprofLabel {
  key: string;
  /** A text label (thread name, container id). */
  str?: string;
  /** A number label (pid). */
  num?: number;
}

export interface PprofOptions {
  /** The sample's values, in order; the last is the one viewers show first. Default: samples, a count. */
  sampleTypes: readonly PprofSampleType[];
  /** What one sampling period measures, and its length (cpu, nanoseconds, 1e9/frequency). Default: none. */
  period?: { type: string; unit: string; value: number };
  /** The root frame of each stack is its thread's name: written as the label `thread_name`. Default true. */
  rootIsThread: boolean;
  /** Labels every sample carries (pid, container id). Default none. */
  labels: readonly PprofLabel[];
  /** The native file of each frame, by its folded name (from the fold); frames not in it keep no native mapping. */
  frameFiles?: ReadonlyMap<string, string>;
  /**
   * The target's native files, full path and build-id, and where the target mapped its code when known: every one is
   * a Mapping, found by file name. Default none.
   */
  binaries: readonly PprofBinary[];
  /** Parts of the stacks' weights by the addresses of their unnamed native frames (FoldResult.addressed). */
  addressed?: readonly AddressedStack[];
  /** Where an unnamed frame of `file` (its name) at `ip` (as perf printed it) lay in the target. Default: nowhere. */
  locate?: (file: string, ip: string) => PprofAddress | undefined;
  /** When the recording started (nanoseconds since 1970) and how long it lasted (nanoseconds). Default: unknown. */
  timeNanos?: bigint;
  durationNanos?: number;
  /** Free text kept with the profile (pprof shows it with -comments). Default none. */
  comments: readonly string[];
}

/** A native file of the target. */
export interface PprofBinary {
  path: string;
  buildId?: string;
  /** The executable mapping of the file in the target: its addresses and the file offset of its first byte. */
  range?: PprofRange;
}

export interface PprofRange {
  start: bigint;
  /** One past the last address. */
  limit: bigint;
  offset: bigint;
}

/** An address in the target, in the mapping of `path` at `range`. */
export interface PprofAddress {
  path: string;
  range: PprofRange;
  address: bigint;
}

export const defaultPprofOptions: Readonly<PprofOptions> = Object.freeze({
  sampleTypes: Object.freeze([{ type: 'samples', unit: 'count', perWeight: 1 }]),
  rootIsThread: true,
  labels: Object.freeze([]),
  binaries: Object.freeze([]),
  comments: Object.freeze([]),
});

/** The label holding a stack's root frame, its thread's name. */
export const threadLabel = 'thread_name';
/** The mapping file names standing for kernel and .NET code. */
export const kernelMapping = '[kernel.kallsyms]';
export const managedMapping = '[managed]';

// profile.proto's field numbers.
const Profile = {
  sampleType: 1,
  sample: 2,
  mapping: 3,
  location: 4,
  function: 5,
  stringTable: 6,
  timeNanos: 9,
  durationNanos: 10,
  periodType: 11,
  period: 12,
  comment: 13,
} as const;
const ValueType = { type: 1, unit: 2 } as const;
const Sample = { locationId: 1, value: 2, label: 3 } as const;
const Label = { key: 1, str: 2, num: 3 } as const;
const Mapping = {
  id: 1,
  memoryStart: 2,
  memoryLimit: 3,
  fileOffset: 4,
  filename: 5,
  buildId: 6,
  hasFunctions: 7,
} as const;
const Location = { id: 1, mappingId: 2, address: 3, line: 4 } as const;
const Line = { functionId: 1 } as const;
const Function = { id: 1, name: 2, systemName: 3, filename: 4 } as const;

/** The pprof profile of `stacks`, gzipped. */
export function renderPprof(stacks: FoldedStacks, options: Partial<PprofOptions> = {}): Uint8Array {
  return gzipSync(encodePprof(stacks, options));
}

/** The pprof profile of `stacks`, not compressed. */
export function encodePprof(stacks: FoldedStacks, options: Partial<PprofOptions> = {}): Uint8Array {
  const o: PprofOptions = { ...defaultPprofOptions, ...options };
  const profile = new PprofBuilder(o);
  const parts = addressedByStack(o.addressed ?? []);
  for (const key of [...stacks.keys()].sort()) {
    const weight = stacks.get(key)!;
    if (!(weight > 0)) continue;
    const frames = key.split(';');
    const addressed = parts.get(key);
    if (!addressed) {
      profile.sample(frames, weight);
      continue;
    }
    // The weight not told apart by address, then each address's part.
    let rest = weight;
    for (const part of addressed) rest -= part.weight;
    if (rest > weight * 1e-9) profile.sample(frames, rest);
    for (const part of addressed) if (part.weight > 0) profile.sample(frames, part.weight, part.addresses);
  }
  return profile.finish();
}

/** The addressed parts by their stack, each stack's in order of their addresses (the same bytes whatever the order). */
function addressedByStack(addressed: readonly AddressedStack[]): Map<string, AddressedStack[]> {
  const byStack = new Map<string, AddressedStack[]>();
  for (const part of addressed) {
    const parts = byStack.get(part.stack);
    if (parts) parts.push(part);
    else byStack.set(part.stack, [part]);
  }
  const key = (part: AddressedStack) => part.addresses.map((a) => a ?? '').join(',');
  for (const parts of byStack.values())
    if (parts.length > 1) parts.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return byStack;
}

interface MappingEntry {
  id: number;
  path: string;
  buildId: string | undefined;
  range: PprofRange | undefined;
  /** A location at an address profcpu did not name lies in it: a backend may name it (has_functions false). */
  unnamed: boolean;
}

class PprofBuilder {
  private readonly out = new ProtoWriter(1 << 16);
  private readonly strings = new Map<string, number>([['', 0]]);
  private readonly functions = new Map<string, number>();
  private readonly locations = new Map<string, number>();
  private readonly mappings = new Map<string, MappingEntry>();
  /** Mappings by file name (a frame knows its file's name only): the first one met of each. */
  private readonly mappingByFile = new Map<string, MappingEntry>();
  /** Build-ids by full path and by file name, for the mappings `locate` gives. */
  private readonly buildIds = new Map<string, string>();
  // Each table's fields, written as they are met and appended to the profile at the end.
  private readonly functionsOut = new ProtoWriter(1 << 14);
  private readonly locationsOut = new ProtoWriter(1 << 14);
  private readonly scratch = new ProtoWriter();
  private readonly line = new ProtoWriter(16);
  private readonly labels: ProtoWriter[];
  private readonly values: number[];
  private locationIds: number[] = [];

  constructor(private readonly o: PprofOptions) {
    for (const type of o.sampleTypes) this.out.message(Profile.sampleType, this.valueType(type.type, type.unit));
    this.values = new Array<number>(o.sampleTypes.length);
    this.labels = o.labels.map((label) => this.label(label));
    for (const { path, buildId } of o.binaries) {
      if (buildId === undefined) continue;
      if (!this.buildIds.has(path)) this.buildIds.set(path, buildId);
      const file = baseName(path);
      if (!this.buildIds.has(file)) this.buildIds.set(file, buildId);
    }
    for (const { path, buildId, range } of o.binaries) this.mapping(path, buildId, range);
  }

  /** One distinct stack, root first; `addresses`: its unnamed native frames' addresses as perf printed them. */
  sample(frames: string[], weight: number, addresses?: readonly (string | undefined)[]): void {
    const first = this.o.rootIsThread && frames.length > 1 ? 1 : 0;
    // Leaf first; an inlined frame goes into the location of the frame it was inlined into (its caller, nearer the
    // root), innermost line first.
    const ids = this.locationIds;
    ids.length = 0;
    let end = frames.length;
    while (end > first) {
      let start = end - 1;
      while (start > first && describeFrame(frames[start]!).style === 'inline') start--;
      const ip = addresses?.[start];
      // The innermost user frame's address is where the thread was; its callers', where each call returns to.
      const returns = ip !== undefined && end < frames.length && describeFrame(frames[end]!).style !== 'kernel';
      ids.push(this.location(frames, start, end, ip, returns));
      end = start;
    }
    for (let i = 0; i < this.values.length; i++) this.values[i] = Math.round(weight * this.o.sampleTypes[i]!.perWeight);
    const sample = this.scratch.reset().packed(Sample.locationId, ids).packed(Sample.value, this.values);
    if (first === 1) sample.message(Sample.label, this.label({ key: threadLabel, str: frames[0]! }));
    for (const label of this.labels) sample.message(Sample.label, label);
    this.out.message(Profile.sample, sample);
  }

  finish(): Uint8Array {
    const { o, out } = this;
    // Mappings last met, first written: whether a backend may name their code is known only now.
    for (const entry of this.mappings.values()) out.message(Profile.mapping, this.mappingMessage(entry));
    out.raw(this.locationsOut.finish()).raw(this.functionsOut.finish());
    // Comments and the period type use strings: into the table before it is written.
    const comments = o.comments.map((comment) => this.string(comment));
    const period = o.period && this.valueType(o.period.type, o.period.unit);
    for (const text of this.strings.keys()) out.string(Profile.stringTable, text);
    if (o.timeNanos !== undefined) out.bigUint(Profile.timeNanos, o.timeNanos);
    if (o.durationNanos !== undefined) out.uint(Profile.durationNanos, o.durationNanos);
    if (period) out.message(Profile.periodType, period).uint(Profile.period, o.period!.value);
    out.packed(Profile.comment, comments);
    return out.finish();
  }

  /**
   * The location of frames[start, end): frames[start] called the rest, inlined into it, innermost last. `ip`: the
   * address perf printed for frames[start], an unnamed native frame; `returns`: it is a return address, which pprof
   * wants inside the call instruction (profile.proto: "a non-leaf address may be in the middle of a call
   * instruction"), as a symboliser needs it when the call is its function's last instruction.
   */
  private location(
    frames: readonly string[],
    start: number,
    end: number,
    ip: string | undefined,
    returns: boolean,
  ): number {
    const frame = frames[start]!;
    const placed = ip === undefined ? undefined : this.placed(frame, ip, returns);
    let key = end - start === 1 ? frame : frames.slice(start, end).join(';');
    if (placed) key += `\0${placed.mapping.id}\0${placed.address}`;
    let id = this.locations.get(key);
    if (id !== undefined) return id;
    id = this.locations.size + 1;
    this.locations.set(key, id);
    const mapping = placed?.mapping.id ?? this.mappingOf(frame);
    const location = new ProtoWriter(64).uint(Location.id, id).uint(Location.mappingId, mapping);
    if (placed) location.bigUint(Location.address, placed.address);
    for (let i = end - 1; i >= start; i--)
      location.message(Location.line, this.line.reset().uint(Line.functionId, this.function(frames[i]!)));
    this.locationsOut.message(Profile.location, location);
    return id;
  }

  /** Where the target had an unnamed native frame, by its file and the address perf printed. */
  private placed(frame: string, ip: string, returns: boolean): { mapping: MappingEntry; address: bigint } | undefined {
    const file = this.o.frameFiles?.get(frame);
    const found = file === undefined ? undefined : this.o.locate?.(file, ip);
    if (!found) return undefined;
    const mapping = this.mapping(found.path, this.buildIds.get(found.path) ?? this.buildIds.get(file!), found.range);
    mapping.unnamed = true;
    return { mapping, address: returns && found.address > found.range.start ? found.address - 1n : found.address };
  }

  private function(frame: string): number {
    let id = this.functions.get(frame);
    if (id !== undefined) return id;
    id = this.functions.size + 1;
    this.functions.set(frame, id);
    const file = this.o.frameFiles?.get(frame);
    const fn = new ProtoWriter(32)
      .uint(Function.id, id)
      .uint(Function.name, this.string(describeFrame(frame).name))
      .uint(Function.systemName, this.string(frame));
    if (file !== undefined) fn.uint(Function.filename, this.string(file));
    this.functionsOut.message(Profile.function, fn);
    return id;
  }

  /** The mapping a frame's code lies in: the kernel, .NET's code, or its native file when known; 0 when not. */
  private mappingOf(frame: string): number {
    const { name, style } = describeFrame(frame);
    if (style === 'kernel') return this.mapping(kernelMapping).id;
    if (style === 'managed') return this.mapping(managedMapping).id;
    // `[libfoo.so]`: perf's name for code of a known file without a symbol.
    const file =
      this.o.frameFiles?.get(frame) ?? (style === 'unknown' && name !== '[unknown]' ? name.slice(1, -1) : undefined);
    if (file === undefined) return 0;
    return (this.mappingByFile.get(file) ?? this.mapping(file)).id;
  }

  private mapping(path: string, buildId?: string, range?: PprofRange): MappingEntry {
    const key = range === undefined ? path : `${path}\0${range.start}`;
    let entry = this.mappings.get(key);
    if (entry !== undefined) return entry;
    entry = { id: this.mappings.size + 1, path, buildId, range, unnamed: false };
    this.mappings.set(key, entry);
    // Strings in order of first use, as the mappings are met.
    this.string(path);
    if (buildId !== undefined) this.string(buildId);
    const file = baseName(path);
    if (!this.mappingByFile.has(file)) this.mappingByFile.set(file, entry);
    return entry;
  }

  private mappingMessage(entry: MappingEntry): ProtoWriter {
    const mapping = new ProtoWriter(64).uint(Mapping.id, entry.id);
    if (entry.range) {
      mapping
        .bigUint(Mapping.memoryStart, entry.range.start)
        .bigUint(Mapping.memoryLimit, entry.range.limit)
        .bigUint(Mapping.fileOffset, entry.range.offset);
    }
    return mapping
      .uint(Mapping.filename, this.string(entry.path))
      .uint(Mapping.buildId, entry.buildId === undefined ? 0 : this.string(entry.buildId))
      .uint(Mapping.hasFunctions, entry.unnamed ? 0 : 1);
  }

  private label(label: PprofLabel): ProtoWriter {
    const writer = new ProtoWriter(16).uint(Label.key, this.string(label.key));
    if (label.str !== undefined) writer.uint(Label.str, this.string(label.str));
    if (label.num !== undefined) writer.uint(Label.num, label.num);
    return writer;
  }

  private valueType(type: string, unit: string): ProtoWriter {
    return new ProtoWriter(16).uint(ValueType.type, this.string(type)).uint(ValueType.unit, this.string(unit));
  }

  private string(text: string): number {
    let id = this.strings.get(text);
    if (id === undefined) {
      id = this.strings.size;
      this.strings.set(text, id);
    }
    return id;
  }
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

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
//   for .NET's JIT-compiled and precompiled code, the native file (with its build-id, so that a backend can
//   symbolise what profcpu could not) for native code whose file is known.
import { gzipSync } from 'node:zlib';
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
  /** The target's native files, full path and build-id: every one is a Mapping, found by file name. Default none. */
  binaries: readonly { path: string; buildId: string }[];
  /** When the recording started (nanoseconds since 1970) and how long it lasted (nanoseconds). Default: unknown. */
  timeNanos?: bigint;
  durationNanos?: number;
  /** Free text kept with the profile (pprof shows it with -comments). Default none. */
  comments: readonly string[];
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
const Mapping = { id: 1, filename: 5, buildId: 6, hasFunctions: 7 } as const;
const Location = { id: 1, mappingId: 2, line: 4 } as const;
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
  for (const key of [...stacks.keys()].sort()) {
    const weight = stacks.get(key)!;
    if (weight > 0) profile.sample(key.split(';'), weight);
  }
  return profile.finish();
}

class PprofBuilder {
  private readonly out = new ProtoWriter(1 << 16);
  private readonly strings = new Map<string, number>([['', 0]]);
  private readonly functions = new Map<string, number>();
  private readonly locations = new Map<string, number>();
  private readonly mappings = new Map<string, number>();
  /** Mapping ids by file name (a frame knows its file's name only). */
  private readonly mappingByFile = new Map<string, number>();
  // Each table's fields, written as they are met and appended to the profile at the end.
  private readonly functionsOut = new ProtoWriter(1 << 14);
  private readonly locationsOut = new ProtoWriter(1 << 14);
  private readonly mappingsOut = new ProtoWriter(1 << 10);
  private readonly scratch = new ProtoWriter();
  private readonly line = new ProtoWriter(16);
  private readonly labels: ProtoWriter[];
  private readonly values: number[];
  private locationIds: number[] = [];

  constructor(private readonly o: PprofOptions) {
    for (const type of o.sampleTypes) this.out.message(Profile.sampleType, this.valueType(type.type, type.unit));
    this.values = new Array<number>(o.sampleTypes.length);
    this.labels = o.labels.map((label) => this.label(label));
    for (const { path, buildId } of o.binaries) this.mapping(path, buildId);
  }

  /** One distinct stack, root first. */
  sample(frames: string[], weight: number): void {
    const first = this.o.rootIsThread && frames.length > 1 ? 1 : 0;
    // Leaf first; an inlined frame goes into the location of the frame it was inlined into (its caller, nearer the
    // root), innermost line first.
    const ids = this.locationIds;
    ids.length = 0;
    let end = frames.length;
    while (end > first) {
      let start = end - 1;
      while (start > first && describeFrame(frames[start]!).style === 'inline') start--;
      ids.push(this.location(frames, start, end));
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
    out.raw(this.mappingsOut.finish()).raw(this.locationsOut.finish()).raw(this.functionsOut.finish());
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

  /** The location of frames[start, end): frames[start] called the rest, inlined into it, innermost last. */
  private location(frames: readonly string[], start: number, end: number): number {
    const key = end - start === 1 ? frames[start]! : frames.slice(start, end).join(';');
    let id = this.locations.get(key);
    if (id !== undefined) return id;
    id = this.locations.size + 1;
    this.locations.set(key, id);
    const location = new ProtoWriter(64).uint(Location.id, id).uint(Location.mappingId, this.mappingOf(frames[start]!));
    for (let i = end - 1; i >= start; i--)
      location.message(Location.line, this.line.reset().uint(Line.functionId, this.function(frames[i]!)));
    this.locationsOut.message(Profile.location, location);
    return id;
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
    if (style === 'kernel') return this.mapping(kernelMapping);
    if (style === 'managed') return this.mapping(managedMapping);
    // `[libfoo.so]`: perf's name for code of a known file without a symbol.
    const file =
      this.o.frameFiles?.get(frame) ?? (style === 'unknown' && name !== '[unknown]' ? name.slice(1, -1) : undefined);
    if (file === undefined) return 0;
    return this.mappingByFile.get(file) ?? this.mapping(file);
  }

  private mapping(path: string, buildId?: string): number {
    let id = this.mappings.get(path);
    if (id !== undefined) return id;
    id = this.mappings.size + 1;
    this.mappings.set(path, id);
    const file = path.slice(path.lastIndexOf('/') + 1);
    if (!this.mappingByFile.has(file)) this.mappingByFile.set(file, id);
    const mapping = new ProtoWriter(64)
      .uint(Mapping.id, id)
      .uint(Mapping.filename, this.string(path))
      .uint(Mapping.buildId, buildId === undefined ? 0 : this.string(buildId))
      .uint(Mapping.hasFunctions, 1);
    this.mappingsOut.message(Profile.mapping, mapping);
    return id;
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

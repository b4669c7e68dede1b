// Frames perf left unnamed in (pid, address as `perf script` printed it, the mapping's name), .NET method names out.
//
// What perf 6.1 prints for a frame it cannot name depends on the mapping (checked on .NET 10, see the tests; perf
// 6.12 prints absolute addresses for the first two cases as well, which the resolver recognises):
// - JIT code with W^X on (the default) runs from `/memfd:doublemapper (deleted)`: perf prints the address relative to
//   the mapping, as an offset into the memfd (address - start + file offset); the same offsets are mapped twice (one
//   executable view, one writable), so only executable mappings translate it back.
// - ReadyToRun code runs from the `.dll` file mapping: same relative form, offset into the file.
// - JIT code with W^X off is anonymous memory: perf prints the absolute address and names the mapping after the perf
//   map it looked in (`/tmp/perf-<pid>.map`), or `//anon`; addresses in no mapping print as `[unknown]`, absolute.
// The absolute address is then looked up in the target's perf map and jitdump (the jitdump alone names ReadyToRun
// methods), and, for a frame in an assembly's mapping they do not name, in the names read from that ReadyToRun image
// itself (readytorun.ts: the runtime logs precompiled code only while the jitdump is on, and some of it never). A
// frame in the runtime's own executable memory (a memfd double mapping, or anonymous) that neither names is a runtime
// stub the runtime never logged (it logs stubs only as it creates them, and replays only methods when the perf map is
// switched on later): named by kind when the table collect read from the runtime's memory covers it
// (`[stub: write barrier]`, see src/dotnet/runtime-stubs/runtime-stubs.ts), else labelled as such, still counted unnamed. The mappings come from the /proc/PID/maps
// snapshot collect refreshes until perf stops: code heaps are added as the process runs and rarely removed (only when
// collectible assemblies unload), so the last copy holds them.

import type { FrameKind } from '../../stacks/frame-kind.js';
import type { FrameResolver, ResolvedFrame, UnnamedFrame } from '../../stacks/frame-name.js';
import {
  FileCodeMappings,
  isAnonymous,
  isExecutable,
  placesInFile,
  ProcMapsIndex,
  type ProcMapping,
} from '../../target/proc-maps.js';
import { CodeMap } from '../../formats/jit/code-map.js';
import type { CodeSymbol, SymbolTable } from '../../formats/jit/symbol-table.js';
import type { StubRangeIndex } from '../runtime-stubs/runtime-stubs-store.js';

/** Names of an assembly's precompiled code by file offset (readytorun-store.ts's ImageNames). */
export interface AssemblyNames {
  /** Where the target mapped the assembly. */
  readonly entry: { readonly path: string };
  lookupFileOffset(offset: bigint): string | undefined;
}

/**
 * The name given to frames in the runtime's executable memory that no map names (kind `unknown`: not named). Seen on
 * .NET 10 with the perf map switched on over IPC: the JIT's copied write barriers, virtual stub dispatch and dynamic
 * helpers, all created at startup.
 */
export const unloggedStubName = '[.NET stub, not in perf map]';

/** The name of a frame in a stub of `kind` (a name from runtime-stubs.ts's stubKinds). */
export function stubName(kind: string): string {
  return `[stub: ${kind}]`;
}

export interface DotnetResolverInput {
  /** Named code, oldest first (the perf map's entries, then the jitdump's): on overlap the later entry wins. */
  symbols: readonly CodeSymbol[] | SymbolTable;
  /** The target's mappings (a /proc/PID/maps snapshot, or several: duplicates are harmless). */
  mappings: readonly ProcMapping[];
  /**
   * The target's pids as perf script prints them (its host pid, its namespace pid when perf ran in that namespace).
   * Frames of other processes are left alone. Empty: every process is taken for the target.
   */
  pids?: readonly number[];
  /**
   * Names read from the ReadyToRun images themselves: asked for frames in an assembly's mapping that the perf map and
   * jitdump do not name (they name ReadyToRun code only when the jitdump was on, and some such code never).
   */
  assemblies?: readonly AssemblyNames[];
  /** The runtime's stub ranges by kind, read from its memory: asked for frames in its executable memory. */
  stubs?: StubRangeIndex;
}

/** How the resolver fared, by outcome: for the naming report and the benchmark. */
export interface ResolverStats {
  jit: number;
  /** ReadyToRun frames named, from the jitdump or from the image. */
  readytorun: number;
  /** Of those, named from the image's own tables (the jitdump did not have them). */
  readytorunFromImage: number;
  /**
   * Frames in the runtime's executable memory (memfd double mapping, anonymous) that no symbol covers, labelled
   * `unloggedStubName`: stubs created before the perf map was switched on. Only counted when some map was read.
   */
  unloggedStubs: number;
  /** Frames in the runtime's executable memory named `[stub: <kind>]` from the stub table read from its memory. */
  stubsFromMemory: number;
  /** Frames in another mapping of the target (a `.dll`) that none of its symbols covers. */
  noSymbol: number;
  /** Addresses in no executable mapping (of that name, for relative ones): broken frame-pointer chains mostly. */
  noMapping: number;
  /** Frames of mappings the resolver does not handle (kernel, vdso, native files) or of other processes. */
  notManaged: number;
  /** Frames left unnamed, by the base name of their mapping (`libclrjit.so`, `[unknown]`). */
  unnamedByFile: Record<string, number>;
}

export interface DotnetResolver extends FrameResolver {
  readonly stats: ResolverStats;
}

/** Builds a resolver over one target's symbols and mappings. */
export function createDotnetResolver(input: DotnetResolverInput): DotnetResolver {
  const stats = noneCounted();
  const name = managedNamer(input, stats);
  const unnamed = unnamedLabeller(input, stats);
  const resolve = frameResolver(input, stats, name, unnamed);
  return keepingAnswers(stats, resolve);
}

/** Names the managed code at an absolute address, `fromFile` being the mapping it was found in. */
type NameAt = (address: bigint, fromFile: ProcMapping | undefined) => ResolvedFrame | undefined;
/** What a frame at an absolute address that no map names gets, by the mapping it is in. */
type LabelUnnamed = (mapping: ProcMapping | undefined, address: bigint) => ResolvedFrame | undefined;
type Resolve = (frame: UnnamedFrame) => ResolvedFrame | undefined;

function noneCounted(): ResolverStats {
  return {
    jit: 0,
    readytorun: 0,
    readytorunFromImage: 0,
    unloggedStubs: 0,
    stubsFromMemory: 0,
    noSymbol: 0,
    noMapping: 0,
    notManaged: 0,
    unnamedByFile: {},
  };
}

/** Names from the perf map and jitdump, else from the ReadyToRun image itself; counted by kind. */
function managedNamer(input: DotnetResolverInput, stats: ResolverStats): NameAt {
  const code = new CodeMap(input.symbols);
  const fromImage = imageNamer(input.assemblies ?? []);
  return (address, fromFile) => {
    const found = code.lookupName(address);
    if (found === undefined) {
      const precompiled = fromImage(address, fromFile);
      if (precompiled === undefined) return undefined;
      stats.readytorun++;
      stats.readytorunFromImage++;
      return { name: precompiled, kind: 'readytorun' };
    }
    const kind: FrameKind = isReadyToRun(found, fromFile) ? 'readytorun' : 'jit';
    stats[kind]++;
    return { name: found, kind };
  };
}

/** Names read from the ReadyToRun images, found by the mapping's path or else its base name. */
function imageNamer(
  assemblies: readonly AssemblyNames[],
): (address: bigint, mapping: ProcMapping | undefined) => string | undefined {
  const assemblyByPath = new Map<string, AssemblyNames>();
  const assemblyByBaseName = new Map<string, AssemblyNames | null>();
  for (const a of assemblies) {
    assemblyByPath.set(a.entry.path, a);
    const base = baseName(a.entry.path);
    // Two assemblies of one name (two runtimes, say) cannot be told apart by it.
    assemblyByBaseName.set(base, assemblyByBaseName.has(base) ? null : a);
  }
  return (address, mapping) => {
    if (mapping === undefined || assemblyByPath.size === 0) return undefined;
    const names = assemblyByPath.get(mapping.path) ?? assemblyByBaseName.get(baseName(mapping.path)) ?? undefined;
    return names?.lookupFileOffset(address - mapping.start + mapping.offset);
  };
}

/** A runtime stub's name (from its stub table, or the unlogged-stub label) or nothing; counted by outcome. */
function unnamedLabeller(input: DotnetResolverInput, stats: ResolverStats): LabelUnnamed {
  // Without any symbol every managed frame would look like an unlogged stub: label them only when a map was read.
  const labelStubs = input.symbols.length > 0;
  return (mapping, address) => {
    if (mapping === undefined || !isExecutable(mapping)) {
      stats.noMapping++;
      return undefined;
    }
    const runtimeMemory = isAnonymous(mapping) || mapping.path.includes('memfd:doublemapper');
    const stub = runtimeMemory ? input.stubs?.find(address) : undefined;
    if (stub) {
      stats.stubsFromMemory++;
      return { name: stubName(stub.kind), kind: 'native' };
    }
    if (labelStubs && (isAnonymous(mapping) || mapping.path.includes('memfd:doublemapper'))) {
      stats.unloggedStubs++;
      return { name: unloggedStubName, kind: 'unknown' };
    }
    stats.noSymbol++;
    return undefined;
  };
}

/** A frame of the target, by how perf printed its address: its mapping found, then named or labelled. */
function frameResolver(input: DotnetResolverInput, stats: ResolverStats, name: NameAt, unnamed: LabelUnnamed): Resolve {
  const all = new ProcMapsIndex(input.mappings);
  const files = new FileCodeMappings(input.mappings);
  const pids = new Set(input.pids ?? []);
  return (frame) => {
    if (frame.pid !== undefined && pids.size > 0 && !pids.has(frame.pid)) {
      stats.notManaged++;
      return undefined;
    }
    const form = addressForm(frame.dso);
    if (form === 'absolute') {
      const mapping = all.find(frame.ip);
      return name(frame.ip, mapping) ?? unnamed(mapping, frame.ip);
    }
    if (form === 'other') {
      stats.notManaged++;
      return undefined;
    }
    return inFileMappings(frame.ip, files.of(frame.dso), name, unnamed);
  };
}

/** A frame perf printed in a file's mapping: `ip` placed among the file's executable mappings, then named. */
function inFileMappings(
  ip: bigint,
  candidates: readonly ProcMapping[],
  name: NameAt,
  unnamed: LabelUnnamed,
): ResolvedFrame | undefined {
  const places = placesInFile(ip, candidates);
  for (const { mapping, address } of places) {
    const found = name(address, mapping);
    if (found) return found;
  }
  const last = places.at(-1);
  return last ? unnamed(last.mapping, last.address) : unnamed(undefined, ip);
}

// The fold and the FlameScope file each ask once per distinct frame: answers are kept so that the stats count
// each distinct frame once, as the naming report says they do.
function keepingAnswers(stats: ResolverStats, resolve: Resolve): DotnetResolver {
  const answers = new Map<string, ResolvedFrame | undefined>();
  return {
    stats,
    resolve(frame) {
      const key = `${frame.pid ?? ''}:${frame.ip}:${frame.dso}`;
      if (answers.has(key)) return answers.get(key);
      const found = resolve(frame);
      if (!found) {
        countUnnamed(stats.unnamedByFile, baseName(frame.dso));
      }
      if (answers.size < maxKeptAnswers) answers.set(key, found);
      return found;
    },
  };
}

/** Adds one to `file`'s count: an own property even for names such as `__proto__` or `constructor` (the target's). */
function countUnnamed(counts: Record<string, number>, file: string): void {
  if (!Object.hasOwn(counts, file))
    Object.defineProperty(counts, file, { value: 0, writable: true, enumerable: true, configurable: true });
  counts[file]!++;
}

/** Distinct frames whose answers are kept (about 100 bytes each). */
const maxKeptAnswers = 1_000_000;

type AddressForm = 'absolute' | 'relative' | 'other';

/** How perf printed the address of a frame in a mapping of this name. */
export function addressForm(dso: string): AddressForm {
  if (dso === '[unknown]' || dso === '' || dso.startsWith('//anon') || dso.startsWith('[anon')) return 'absolute';
  if (/(^|\/)perf-\d+\.map$/.test(dso)) return 'absolute';
  // Managed code lives in memfd double mappings and in assembly files; everything else (ELF files, the kernel,
  // [vdso]) is perf's own business.
  if (dso.includes('memfd:doublemapper') || /\.(dll|exe|ni\.r2r)$/i.test(dso)) return 'relative';
  return 'other';
}

/** ReadyToRun code: tagged by the runtime (`[PreJIT]`, `[PreJit-cold]`), or found inside an assembly's mapping. */
function isReadyToRun(name: string, mapping: ProcMapping | undefined): boolean {
  if (hasReadyToRunTag(name)) return true;
  return mapping !== undefined && /\.(dll|exe)$/i.test(mapping.path);
}

/** The runtime tags ReadyToRun code `[PreJIT]` (hot part) or `[PreJit-cold]` when it shows optimization tiers. */
export const readyToRunTags = Object.freeze(['[PreJIT]', '[PreJit-cold]'] as const);

/** Whether `name` ends with one of readyToRunTags. */
export function hasReadyToRunTag(name: string): boolean {
  // Not readyToRunTags.some(): this runs for every frame named.
  return name.endsWith(readyToRunTags[0]) || name.endsWith(readyToRunTags[1]);
}

function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

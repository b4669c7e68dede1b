// The .NET runtime's stubs, by kind, read from its own bookkeeping in the target's memory: the execution manager's
// range section map (ExecutionManager contract of the cDAC, .NET 8+) lists every range of code the runtime made or
// mapped. A range section over a loader heap of stubs carries a range list whose type says what kind (stub precode,
// fixup precode...); a range section over a code heap holds JIT-compiled methods and stubs side by side, told apart by
// the word before each code block, found through the heap's nibble map: a small number (at most StubCodeBlockLast)
// is the stub's kind, anything else points to a method's code header. In: a memory reader and the contract
// descriptor; out: a sorted list of stub ranges with kinds. Everything read is the target's to forge: the map's
// levels, the fragment lists and the heaps are walked under counts and sizes fixed here, each pointer read once,
// and a range that makes no sense is skipped and counted, never followed. Two kinds come from elsewhere: `stub
// linker` (the global loader allocator's stub heap, which no range section covers) and `write barrier` (the runtime's
// patched copy of its barriers, found by runtime-stubs-step.ts).
import type { ContractDescriptor } from './contract-descriptor.js';
import { withDeadline } from '../files/bounded-read.js';
import { MemoryReadError, type ProcessMemory } from '../target/process-memory.js';

/** A range of the target's code holding stubs of one kind. */
export interface StubRange {
  start: bigint;
  /** Exclusive. */
  end: bigint;
  kind: StubKind;
}

/**
 * The runtime's StubCodeBlockKind values (src/coreclr/vm/codeman.h, the same from .NET 8 to 10) as names; values
 * without a name here are called `kind <n>`. Frames in them are named `[stub: <name>]` (resolver.ts).
 */
export const stubKinds = Object.freeze({
  0: 'unknown',
  1: 'jump',
  2: 'precode',
  3: 'dynamic helper',
  4: 'stub precode',
  5: 'fixup precode',
  6: 'virtual dispatch',
  7: 'virtual resolve',
  8: 'virtual lookup',
  9: 'virtual vtable',
} as Record<number, string>);

export type StubKind = string;

export function stubKindName(value: number): StubKind {
  return Object.hasOwn(stubKinds, value) ? stubKinds[value]! : `kind ${value}`;
}

/** Bounds on the walk, all of the target's choosing otherwise. */
export interface StubWalkLimits {
  /** Map tables (256 pointers each) read at most. */
  maxMapTables: number;
  /** Range section fragments read at most, all lists together. */
  maxFragments: number;
  /** Distinct range sections read at most. */
  maxRangeSections: number;
  /** Largest code heap whose nibble map is read, bytes of code. */
  maxCodeHeapBytes: number;
  /** Code blocks whose header word is read at most, all heaps together. */
  maxCodeBlocks: number;
  /** Stub ranges kept at most. */
  maxRanges: number;
}

export const stubWalkDefaults: Readonly<StubWalkLimits> = Object.freeze({
  maxMapTables: 4096,
  maxFragments: 100_000,
  maxRangeSections: 20_000,
  maxCodeHeapBytes: 1 << 30,
  maxCodeBlocks: 1_000_000,
  maxRanges: 200_000,
});

/**
 * Layout facts the descriptor of .NET 10.0 does not give (checked on 10.0.12; .NET 8 and 9 have the same): where a
 * RangeSection keeps its range list, and where that CodeRangeMapRangeList keeps its kind.
 */
export const assumedLayout = Object.freeze({
  rangeSectionRangeList: 0x30,
  rangeListType: 0x120,
  /** Where a LoaderHeap keeps its first block; a block is { next, address, size }. */
  loaderHeapFirstBlock: 0x8,
});

/** Blocks of the global stub heap read at most. */
const maxStubHeapBlocks = 10_000;
/** Largest stub heap block believed, bytes. */
const maxStubHeapBlockBytes = 1n << 30n;

export interface StubWalkResult {
  ranges: StubRange[];
  /** Range sections seen, by what they hold. */
  sections: { rangeLists: number; codeHeaps: number; other: number };
  /** Code blocks looked at in code heaps, and how many of them were stubs. */
  codeBlocks: number;
  stubBlocks: number;
  /** Offsets the descriptor did not give and the walk took from assumedLayout. */
  assumed: string[];
  /** Things refused or left out, with why (capped). */
  skipped: string[];
}

const rangeListFlag = 4;
const codeHeapFlag = 2;
const levels = 5;
const entriesPerLevel = 256;

/**
 * Walks the range section map that `descriptor` points to; throws MemoryReadError for missing pieces and spent
 * budgets. With `deadline`, a read that never returns (memory the target backed with a FUSE file, say) fails the walk
 * when it passes, instead of holding it.
 */
export async function walkRuntimeStubs(
  memory: ProcessMemory,
  descriptor: ContractDescriptor,
  limits: Partial<StubWalkLimits> = {},
  deadline?: { timeoutMs: number; signal?: AbortSignal | undefined },
): Promise<StubWalkResult> {
  if (deadline) return withDeadline(deadline, 'the target’s memory', () => walk(memory, descriptor, limits));
  return walk(memory, descriptor, limits);
}

async function walk(
  memory: ProcessMemory,
  descriptor: ContractDescriptor,
  limits: Partial<StubWalkLimits>,
): Promise<StubWalkResult> {
  const opts = { ...stubWalkDefaults, ...limits };
  const result: StubWalkResult = {
    ranges: [],
    sections: { rangeLists: 0, codeHeaps: 0, other: 0 },
    codeBlocks: 0,
    stubBlocks: 0,
    assumed: [],
    skipped: [],
  };
  const skip = (why: string) => {
    if (result.skipped.length < 20) result.skipped.push(why);
  };
  const need = (type: string, field: string): number => {
    const offset = descriptor.field(type, field);
    if (offset === undefined) throw new MemoryReadError(`the descriptor gives no ${type}.${field}`);
    return offset;
  };
  const map = descriptor.global('ExecutionManagerCodeRangeMapAddress');
  if (map === undefined || map === 0n) throw new MemoryReadError('the descriptor gives no code range map');
  const stubLast = Number(descriptor.global('StubCodeBlockLast') ?? 0xfn);
  const layout = {
    topLevel: need('RangeSectionMap', 'TopLevelData'),
    fragmentNext: need('RangeSectionFragment', 'Next'),
    fragmentSection: need('RangeSectionFragment', 'RangeSection'),
    begin: need('RangeSection', 'RangeBegin'),
    end: need('RangeSection', 'RangeEndOpen'),
    flags: need('RangeSection', 'Flags'),
    heapList: need('RangeSection', 'HeapList'),
    rangeList: descriptor.field('RangeSection', 'RangeList'),
    rangeListType: descriptor.field('CodeRangeMapRangeList', 'RangeListType'),
    heapStart: need('CodeHeapListNode', 'StartAddress'),
    heapEnd: need('CodeHeapListNode', 'EndAddress'),
    mapBase: need('CodeHeapListNode', 'MapBase'),
    headerMap: need('CodeHeapListNode', 'HeaderMap'),
  };
  if (layout.rangeList === undefined) {
    layout.rangeList = assumedLayout.rangeSectionRangeList;
    result.assumed.push(`RangeSection.RangeList = 0x${layout.rangeList.toString(16)}`);
  }
  if (layout.rangeListType === undefined) {
    layout.rangeListType = assumedLayout.rangeListType;
    result.assumed.push(`CodeRangeMapRangeList.RangeListType = 0x${layout.rangeListType.toString(16)}`);
  }
  const rangeListAt = layout.rangeList;
  const rangeListTypeAt = layout.rangeListType;

  const ptr = (bytes: DataView, at: number) => bytes.getBigUint64(at, true);
  const readView = async (address: bigint, length: number) => {
    const bytes = await memory.read(address, length);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  };
  const sectionBytes = Math.max(layout.begin, layout.end, layout.flags + 4, layout.heapList, rangeListAt) + 8;
  const heapBytes = Math.max(layout.heapStart, layout.heapEnd, layout.mapBase, layout.headerMap) + 8;

  // Each pointer is followed once: a forged map that points back into itself, or lists that loop, end here.
  const seen = new Set<bigint>();
  const firstVisit = (address: bigint) => {
    if (seen.has(address)) return false;
    seen.add(address);
    return true;
  };
  let tables = 0;
  let fragments = 0;
  const sections: bigint[] = [];
  const sectionSet = new Set<bigint>();

  // The map's levels, top first: the top table lies inside the map itself, the others are pointed to. Pointers in
  // the map carry a flag in bit 0 (collectible) that is no part of the address.
  const walkTable = async (table: bigint, level: number): Promise<void> => {
    if (++tables > opts.maxMapTables) throw new MemoryReadError(`more than ${opts.maxMapTables} map tables`, true);
    const entries = await readView(table, entriesPerLevel * 8);
    for (let i = 0; i < entriesPerLevel; i++) {
      const next = ptr(entries, i * 8) & ~1n;
      if (next === 0n || !firstVisit(next)) continue;
      try {
        if (level > 1) await walkTable(next, level - 1);
        else await walkFragments(next);
      } catch (error) {
        // Unreadable memory where the map points: that branch is left out, the rest still read.
        if (!(error instanceof MemoryReadError) || error.limit) throw error;
        skip(`map entry 0x${next.toString(16)}: ${error.message}`);
      }
    }
  };
  const walkFragments = async (first: bigint): Promise<void> => {
    for (let fragment = first; fragment !== 0n;) {
      if (++fragments > opts.maxFragments) throw new MemoryReadError(`more than ${opts.maxFragments} fragments`, true);
      const bytes = await readView(fragment, Math.max(layout.fragmentNext, layout.fragmentSection) + 8);
      const section = ptr(bytes, layout.fragmentSection);
      if (section !== 0n && !sectionSet.has(section)) {
        if (sectionSet.size >= opts.maxRangeSections)
          throw new MemoryReadError(`more than ${opts.maxRangeSections} range sections`, true);
        sectionSet.add(section);
        sections.push(section);
      }
      const next = ptr(bytes, layout.fragmentNext) & ~1n;
      if (next === 0n || !firstVisit(next)) break;
      fragment = next;
    }
  };

  const add = (start: bigint, end: bigint, kind: StubKind) => {
    if (result.ranges.length >= opts.maxRanges)
      throw new MemoryReadError(`more than ${opts.maxRanges} stub ranges`, true);
    result.ranges.push({ start, end, kind });
  };

  const readRangeList = async (begin: bigint, end: bigint, rangeList: bigint) => {
    const kind = (await readView(rangeList + BigInt(rangeListTypeAt), 4)).getUint32(0, true);
    add(begin, end, stubKindName(kind));
  };

  // A code heap: its nibble map gives each code block's start; the word before a start says stub (its kind) or
  // method (a pointer). Nibble map, .NET 9+ (ExecutionManager contract 2): one 32-bit word per 256 bytes of code,
  // eight nibbles for its eight 32-byte buckets, the first bucket in the top nibble; a nibble n of 1 to 8 says a
  // block starts at bucket + (n - 1) * 4. A word whose lowest nibble is 9 or more instead points back to the start of
  // a block that covers it (the start is in an earlier word, already seen).
  const readCodeHeap = async (begin: bigint, end: bigint, node: bigint) => {
    const heap = await readView(node, heapBytes);
    const mapBase = ptr(heap, layout.mapBase);
    const headerMap = ptr(heap, layout.headerMap);
    const heapEnd = ptr(heap, layout.heapEnd);
    const stop = heapEnd > begin && heapEnd <= end ? heapEnd : end;
    if (mapBase > begin || stop <= mapBase || headerMap === 0n) {
      skip(`code heap 0x${begin.toString(16)}: map base 0x${mapBase.toString(16)} outside its range`);
      return;
    }
    if (stop - mapBase > BigInt(opts.maxCodeHeapBytes)) {
      skip(`code heap 0x${begin.toString(16)}: ${stop - mapBase} bytes, more than ${opts.maxCodeHeapBytes}`);
      return;
    }
    const words = Number((stop - mapBase + 255n) / 256n);
    const starts: bigint[] = [];
    const chunkWords = 16_384;
    for (let first = 0; first < words; first += chunkWords) {
      const count = Math.min(chunkWords, words - first);
      const map = await readView(headerMap + BigInt(first * 4), count * 4);
      for (let w = 0; w < count; w++) {
        const word = map.getUint32(w * 4, true);
        if (word === 0 || (word & 0xf) > 8) continue;
        const base = mapBase + BigInt((first + w) * 256);
        for (let bucket = 0; bucket < 8; bucket++) {
          const nibble = (word >>> (28 - bucket * 4)) & 0xf;
          if (nibble === 0) continue;
          if (nibble > 8) break;
          const start = base + BigInt(bucket * 32 + (nibble - 1) * 4);
          if (start >= begin + 8n && start < stop) starts.push(start);
        }
      }
    }
    for (let i = 0; i < starts.length; i++) {
      if (++result.codeBlocks > opts.maxCodeBlocks)
        throw new MemoryReadError(`more than ${opts.maxCodeBlocks} code blocks`, true);
      const start = starts[i]!;
      const header = ptr(await readView(start - 8n, 8), 0);
      if (header > BigInt(stubLast)) continue;
      result.stubBlocks++;
      const next = starts[i + 1] ?? stop;
      // Adjacent stubs of one kind are one range.
      const kind = stubKindName(Number(header));
      const last = result.ranges.at(-1);
      if (last && last.kind === kind && last.end === start) last.end = next;
      else add(start, next, kind);
    }
  };

  // The stubs the runtime's stub linker makes for the whole process (delegate shuffle thunks, instantiating stubs)
  // live in the global loader allocator's stub heap, which no range section covers: its blocks are listed by the
  // heap itself.
  const readStubHeap = async () => {
    const systemDomainVariable = descriptor.global('SystemDomain');
    const allocatorAt = descriptor.field('SystemDomain', 'GlobalLoaderAllocator');
    const stubHeapAt = descriptor.field('LoaderAllocator', 'StubHeap');
    if (systemDomainVariable === undefined || allocatorAt === undefined || stubHeapAt === undefined) {
      skip('the descriptor does not lead to the global stub heap');
      return;
    }
    const systemDomain = ptr(await readView(systemDomainVariable, 8), 0);
    if (systemDomain === 0n) return;
    // The global loader allocator is a member of the SystemDomain, not a pointer.
    const heap = ptr(await readView(systemDomain + BigInt(allocatorAt + stubHeapAt), 8), 0);
    if (heap === 0n) return;
    result.assumed.push(`LoaderHeap first block = 0x${assumedLayout.loaderHeapFirstBlock.toString(16)}`);
    let block = ptr(await readView(heap + BigInt(assumedLayout.loaderHeapFirstBlock), 8), 0);
    for (let n = 0; block !== 0n && n < maxStubHeapBlocks; n++) {
      if (!firstVisit(block)) break;
      const bytes = await readView(block, 24);
      const start = ptr(bytes, 8);
      const size = ptr(bytes, 16);
      if (start !== 0n && size > 0n && size <= maxStubHeapBlockBytes) add(start, start + size, 'stub linker');
      else skip(`stub heap block 0x${block.toString(16)}: 0x${start.toString(16)}, ${size} bytes`);
      block = ptr(bytes, 0);
    }
  };
  await walkTable(map + BigInt(layout.topLevel), levels);
  try {
    await readStubHeap();
  } catch (error) {
    if (!(error instanceof MemoryReadError) || error.limit) throw error;
    skip(`the global stub heap: ${error.message}`);
  }
  for (const section of sections) {
    let bytes: DataView;
    try {
      bytes = await readView(section, sectionBytes);
    } catch (error) {
      if (error instanceof MemoryReadError && error.limit) throw error;
      skip(`range section 0x${section.toString(16)}: ${(error as Error).message}`);
      continue;
    }
    const begin = ptr(bytes, layout.begin);
    const end = ptr(bytes, layout.end);
    const flags = bytes.getUint32(layout.flags, true);
    if (begin === 0n || end <= begin) {
      skip(`range section 0x${section.toString(16)}: range 0x${begin.toString(16)}-0x${end.toString(16)}`);
      continue;
    }
    try {
      if (flags & rangeListFlag) {
        result.sections.rangeLists++;
        const rangeList = ptr(bytes, rangeListAt);
        if (rangeList !== 0n) await readRangeList(begin, end, rangeList);
      } else if (flags & codeHeapFlag) {
        result.sections.codeHeaps++;
        const node = ptr(bytes, layout.heapList);
        if (node !== 0n) await readCodeHeap(begin, end, node);
      } else result.sections.other++;
    } catch (error) {
      if (!(error instanceof MemoryReadError) || error.limit) throw error;
      skip(`range section 0x${begin.toString(16)}: ${error.message}`);
    }
  }
  result.ranges = mergeRanges(result.ranges);
  return result;
}

/** Sorted by start; overlapping ranges (a forged or changing map) keep the first, later overlaps cut or dropped. */
export function mergeRanges(ranges: readonly StubRange[]): StubRange[] {
  const sorted = [...ranges].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  const out: StubRange[] = [];
  for (const r of sorted) {
    const last = out.at(-1);
    if (last && r.start < last.end) {
      if (r.end <= last.end) continue;
      if (r.kind === last.kind) last.end = r.end;
      else out.push({ start: last.end, end: r.end, kind: r.kind });
      continue;
    }
    if (last && last.end === r.start && last.kind === r.kind) last.end = r.end;
    else out.push({ ...r });
  }
  return out;
}

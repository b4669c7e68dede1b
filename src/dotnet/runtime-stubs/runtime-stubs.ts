// The .NET runtime's stubs, by kind, read from its own bookkeeping in the target's memory: the execution manager's
// range section map (ExecutionManager contract of the cDAC, .NET 8+) lists every range of code the runtime made or
// mapped. A range section over a loader heap of stubs carries a range list whose type says what kind (stub precode,
// fixup precode...); a range section over a code heap holds JIT-compiled methods and stubs side by side, told apart by
// the word before each code block, found through the heap's nibble map: a small number (at most StubCodeBlockLast)
// is the stub's kind, anything else points to a method's code header. In: a memory reader and the contract
// descriptor (.NET 10's own, or for 8 and 9 the one dac-table-layout.ts builds); out: a sorted list of stub ranges with kinds. Everything read is the target's to forge: the map's
// levels, the fragment lists and the heaps are walked under counts and sizes fixed here, each pointer read once,
// and a range that makes no sense is skipped and counted, never followed. Two kinds come from elsewhere: `stub
// linker` (the global loader allocator's stub heap, which no range section covers) and `write barrier` (the runtime's
// patched copy of its barriers, found by runtime-stubs-step.ts).
import type { ContractDescriptor } from './contract-descriptor.js';
import { withDeadline } from '../../files/bounded-read.js';
import { MemoryReadError, type ProcessMemory } from '../../target/process-memory.js';

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

/** Where the walk finds what it reads: offsets into the runtime's structures. */
interface WalkLayout {
  topLevel: number;
  fragmentNext: number;
  fragmentSection: number;
  begin: number;
  end: number;
  flags: number;
  heapList: number;
  rangeList: number;
  rangeListType: number;
  heapStart: number;
  heapEnd: number;
  mapBase: number;
  headerMap: number;
}

/** The layout from the descriptor, assumedLayout filling in (and named in `assumed`) what it does not give. */
function walkLayout(descriptor: ContractDescriptor, assumed: string[]): WalkLayout {
  const need = (type: string, field: string): number => {
    const offset = descriptor.field(type, field);
    if (offset === undefined) throw new MemoryReadError(`the descriptor gives no ${type}.${field}`);
    return offset;
  };
  const orAssumed = (type: string, field: string, offset: number): number => {
    const given = descriptor.field(type, field);
    if (given !== undefined) return given;
    assumed.push(`${type}.${field} = 0x${offset.toString(16)}`);
    return offset;
  };
  return {
    topLevel: need('RangeSectionMap', 'TopLevelData'),
    fragmentNext: need('RangeSectionFragment', 'Next'),
    fragmentSection: need('RangeSectionFragment', 'RangeSection'),
    begin: need('RangeSection', 'RangeBegin'),
    end: need('RangeSection', 'RangeEndOpen'),
    flags: need('RangeSection', 'Flags'),
    heapList: need('RangeSection', 'HeapList'),
    rangeList: orAssumed('RangeSection', 'RangeList', assumedLayout.rangeSectionRangeList),
    rangeListType: orAssumed('CodeRangeMapRangeList', 'RangeListType', assumedLayout.rangeListType),
    heapStart: need('CodeHeapListNode', 'StartAddress'),
    heapEnd: need('CodeHeapListNode', 'EndAddress'),
    mapBase: need('CodeHeapListNode', 'MapBase'),
    headerMap: need('CodeHeapListNode', 'HeaderMap'),
  };
}

async function walk(
  memory: ProcessMemory,
  descriptor: ContractDescriptor,
  limits: Partial<StubWalkLimits>,
): Promise<StubWalkResult> {
  const map = descriptor.global('ExecutionManagerCodeRangeMapAddress');
  if (map === undefined || map === 0n) throw new MemoryReadError('the descriptor gives no code range map');
  const walker = new MapWalker(memory, descriptor, { ...stubWalkDefaults, ...limits });
  await walker.walkTable(map + BigInt(walker.layout.topLevel), levels);
  try {
    await walker.readStubHeap();
  } catch (error) {
    if (!(error instanceof MemoryReadError) || error.limit) throw error;
    walker.skip(`the global stub heap: ${error.message}`);
  }
  for (const section of walker.sections) await walker.readSection(section);
  walker.result.ranges = mergeRanges(walker.result.ranges);
  return walker.result;
}

/**
 * One walk's state: what was found, what was counted against the limits, and every pointer followed. The map is read
 * first (collecting range sections), then the global stub heap, then each section.
 */
class MapWalker {
  readonly result: StubWalkResult = {
    ranges: [],
    sections: { rangeLists: 0, codeHeaps: 0, other: 0 },
    codeBlocks: 0,
    stubBlocks: 0,
    assumed: [],
    skipped: [],
  };
  readonly layout: WalkLayout;
  /** Range sections found in the map, in the order found. */
  readonly sections: bigint[] = [];
  private readonly sectionSet = new Set<bigint>();
  /** Each pointer is followed once: a forged map that points back into itself, or lists that loop, end here. */
  private readonly seen = new Set<bigint>();
  private tables = 0;
  private fragments = 0;
  private readonly stubLast: bigint;
  private readonly sectionBytes: number;
  private readonly heapBytes: number;

  constructor(
    private readonly memory: ProcessMemory,
    private readonly descriptor: ContractDescriptor,
    private readonly limits: StubWalkLimits,
  ) {
    this.layout = walkLayout(descriptor, this.result.assumed);
    const l = this.layout;
    this.stubLast = descriptor.global('StubCodeBlockLast') ?? 0xfn;
    this.sectionBytes = Math.max(l.begin, l.end, l.flags + 4, l.heapList, l.rangeList) + 8;
    this.heapBytes = Math.max(l.heapStart, l.heapEnd, l.mapBase, l.headerMap) + 8;
  }

  skip(why: string): void {
    if (this.result.skipped.length < 20) this.result.skipped.push(why);
  }

  private firstVisit(address: bigint): boolean {
    if (this.seen.has(address)) return false;
    this.seen.add(address);
    return true;
  }

  private async readView(address: bigint, length: number): Promise<DataView> {
    const bytes = await this.memory.read(address, length);
    return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  private async readPointer(address: bigint): Promise<bigint> {
    return ptr(await this.readView(address, 8), 0);
  }

  private add(start: bigint, end: bigint, kind: StubKind): void {
    if (this.result.ranges.length >= this.limits.maxRanges)
      throw new MemoryReadError(`more than ${this.limits.maxRanges} stub ranges`, true);
    this.result.ranges.push({ start, end, kind });
  }

  /**
   * The map's levels, top first: the top table lies inside the map itself, the others are pointed to. Pointers in the
   * map carry a flag in bit 0 (collectible) that is no part of the address.
   */
  async walkTable(table: bigint, level: number): Promise<void> {
    if (++this.tables > this.limits.maxMapTables)
      throw new MemoryReadError(`more than ${this.limits.maxMapTables} map tables`, true);
    const entries = await this.readView(table, entriesPerLevel * 8);
    for (let i = 0; i < entriesPerLevel; i++) {
      const next = ptr(entries, i * 8) & ~1n;
      if (next === 0n || !this.firstVisit(next)) continue;
      try {
        if (level > 1) await this.walkTable(next, level - 1);
        else await this.walkFragments(next);
      } catch (error) {
        // Unreadable memory where the map points: that branch is left out, the rest still read.
        if (!(error instanceof MemoryReadError) || error.limit) throw error;
        this.skip(`map entry 0x${next.toString(16)}: ${error.message}`);
      }
    }
  }

  /** A bottom-level entry's list of fragments, each naming the range section it belongs to. */
  private async walkFragments(first: bigint): Promise<void> {
    const { fragmentNext, fragmentSection } = this.layout;
    for (let fragment = first; fragment !== 0n;) {
      if (++this.fragments > this.limits.maxFragments)
        throw new MemoryReadError(`more than ${this.limits.maxFragments} fragments`, true);
      const bytes = await this.readView(fragment, Math.max(fragmentNext, fragmentSection) + 8);
      const section = ptr(bytes, fragmentSection);
      if (section !== 0n && !this.sectionSet.has(section)) {
        if (this.sectionSet.size >= this.limits.maxRangeSections)
          throw new MemoryReadError(`more than ${this.limits.maxRangeSections} range sections`, true);
        this.sectionSet.add(section);
        this.sections.push(section);
      }
      const next = ptr(bytes, fragmentNext) & ~1n;
      if (next === 0n || !this.firstVisit(next)) break;
      fragment = next;
    }
  }

  /** One range section: a range list (one kind over the whole range) or a code heap; unreadable ones are skipped. */
  async readSection(section: bigint): Promise<void> {
    const l = this.layout;
    let bytes: DataView;
    try {
      bytes = await this.readView(section, this.sectionBytes);
    } catch (error) {
      if (!(error instanceof MemoryReadError) || error.limit) throw error;
      this.skip(`range section 0x${section.toString(16)}: ${error.message}`);
      return;
    }
    const begin = ptr(bytes, l.begin);
    const end = ptr(bytes, l.end);
    const flags = bytes.getUint32(l.flags, true);
    if (begin === 0n || end <= begin) {
      this.skip(`range section 0x${section.toString(16)}: range 0x${begin.toString(16)}-0x${end.toString(16)}`);
      return;
    }
    try {
      if (flags & rangeListFlag) {
        this.result.sections.rangeLists++;
        const rangeList = ptr(bytes, l.rangeList);
        if (rangeList === 0n) return;
        const kind = (await this.readView(rangeList + BigInt(l.rangeListType), 4)).getUint32(0, true);
        this.add(begin, end, stubKindName(kind));
      } else if (flags & codeHeapFlag) {
        this.result.sections.codeHeaps++;
        const node = ptr(bytes, l.heapList);
        if (node !== 0n) await this.readCodeHeap(begin, end, node);
      } else this.result.sections.other++;
    } catch (error) {
      if (!(error instanceof MemoryReadError) || error.limit) throw error;
      this.skip(`range section 0x${begin.toString(16)}: ${error.message}`);
    }
  }

  /**
   * A code heap: its nibble map gives each code block's start; the word before a start says stub (its kind) or
   * method (a pointer). Each start is handled as the map yields it, counted against maxCodeBlocks, so a forged map
   * dense with starts costs at most that many header reads and no memory per start.
   */
  private async readCodeHeap(begin: bigint, end: bigint, node: bigint): Promise<void> {
    const heap = await this.readView(node, this.heapBytes);
    const mapBase = ptr(heap, this.layout.mapBase);
    const headerMap = ptr(heap, this.layout.headerMap);
    const heapEnd = ptr(heap, this.layout.heapEnd);
    const stop = heapEnd > begin && heapEnd <= end ? heapEnd : end;
    if (mapBase > begin || stop <= mapBase || headerMap === 0n) {
      this.skip(`code heap 0x${begin.toString(16)}: map base 0x${mapBase.toString(16)} outside its range`);
      return;
    }
    if (stop - mapBase > BigInt(this.limits.maxCodeHeapBytes)) {
      this.skip(
        `code heap 0x${begin.toString(16)}: ${stop - mapBase} bytes, more than ${this.limits.maxCodeHeapBytes}`,
      );
      return;
    }
    // Offsets from mapBase: below maxCodeHeapBytes, exact as numbers.
    const first = Number(begin + 8n - mapBase);
    const size = Number(stop - mapBase);
    let previous: number | undefined;
    for await (const offset of this.blockStarts(headerMap, size)) {
      if (offset < first) continue;
      if (previous !== undefined) await this.readCodeBlock(mapBase, previous, offset);
      previous = offset;
    }
    if (previous !== undefined) await this.readCodeBlock(mapBase, previous, size);
  }

  /**
   * The block starts a heap's nibble map gives, as offsets from its map base, ascending, read in chunks. One 32-bit
   * word per 256 bytes of code, eight nibbles for its eight 32-byte buckets, the first bucket in the top nibble; a
   * nibble n of 1 to 8 says a block starts at bucket + (n - 1) * 4. .NET 8's map is just that; .NET 9 and later
   * (ExecutionManager contract 2) also mark a word whose lowest nibble is 9 or more as a pointer back to the start of a
   * block that covers it (in an earlier word, already yielded), which is no start.
   */
  private async *blockStarts(headerMap: bigint, size: number): AsyncGenerator<number> {
    const words = Math.ceil(size / 256);
    const chunkWords = 16_384;
    for (let chunk = 0; chunk < words; chunk += chunkWords) {
      const count = Math.min(chunkWords, words - chunk);
      const map = await this.readView(headerMap + BigInt(chunk * 4), count * 4);
      for (let w = 0; w < count; w++) {
        const word = map.getUint32(w * 4, true);
        if (word === 0 || (word & 0xf) > 8) continue;
        for (let bucket = 0; bucket < 8; bucket++) {
          const nibble = (word >>> (28 - bucket * 4)) & 0xf;
          if (nibble === 0) continue;
          if (nibble > 8) break;
          const offset = (chunk + w) * 256 + bucket * 32 + (nibble - 1) * 4;
          if (offset < size) yield offset;
        }
      }
    }
  }

  /** The code block from `offset` to `next` (offsets from `mapBase`): a stub of the kind its header word says, or not. */
  private async readCodeBlock(mapBase: bigint, offset: number, next: number): Promise<void> {
    if (++this.result.codeBlocks > this.limits.maxCodeBlocks)
      throw new MemoryReadError(`more than ${this.limits.maxCodeBlocks} code blocks`, true);
    const start = mapBase + BigInt(offset);
    const header = await this.readPointer(start - 8n);
    if (header > this.stubLast) return;
    this.result.stubBlocks++;
    const end = mapBase + BigInt(next);
    // Adjacent stubs of one kind are one range.
    const kind = stubKindName(Number(header));
    const last = this.result.ranges.at(-1);
    if (last && last.kind === kind && last.end === start) last.end = end;
    else this.add(start, end, kind);
  }

  /**
   * The stubs the runtime's stub linker makes for the whole process (delegate shuffle thunks, instantiating stubs)
   * live in the global loader allocator's stub heap, which no range section covers: its blocks are listed by the heap
   * itself.
   */
  async readStubHeap(): Promise<void> {
    const systemDomainVariable = this.descriptor.global('SystemDomain');
    const allocatorAt = this.descriptor.field('SystemDomain', 'GlobalLoaderAllocator');
    const stubHeapAt = this.descriptor.field('LoaderAllocator', 'StubHeap');
    if (systemDomainVariable === undefined || allocatorAt === undefined || stubHeapAt === undefined) {
      this.skip('the descriptor does not lead to the global stub heap');
      return;
    }
    const systemDomain = await this.readPointer(systemDomainVariable);
    if (systemDomain === 0n) return;
    // The global loader allocator is a member of the SystemDomain, not a pointer.
    const heap = await this.readPointer(systemDomain + BigInt(allocatorAt + stubHeapAt));
    if (heap === 0n) return;
    this.result.assumed.push(`LoaderHeap first block = 0x${assumedLayout.loaderHeapFirstBlock.toString(16)}`);
    let block = await this.readPointer(heap + BigInt(assumedLayout.loaderHeapFirstBlock));
    for (let n = 0; block !== 0n && n < maxStubHeapBlocks; n++) {
      if (!this.firstVisit(block)) break;
      const bytes = await this.readView(block, 24);
      const start = ptr(bytes, 8);
      const size = ptr(bytes, 16);
      if (start !== 0n && size > 0n && size <= maxStubHeapBlockBytes) this.add(start, start + size, 'stub linker');
      else this.skip(`stub heap block 0x${block.toString(16)}: 0x${start.toString(16)}, ${size} bytes`);
      block = ptr(bytes, 0);
    }
  }
}

function ptr(bytes: DataView, at: number): bigint {
  return bytes.getBigUint64(at, true);
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

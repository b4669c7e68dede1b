// The execution manager's layout for .NET 8 and 9, which export no data descriptor: the offsets the runtime-stubs
// walk reads are fixed per major version (the same in 8 and 9, and the same as .NET 10.0's descriptor gives, but for
// where the global loader allocator keeps its stub heap), and the two addresses it needs are slots of `g_dacTable` (the
// table of addresses libcoreclr.so exports for its debugger, in dacvars.h's order; slots are pointers since .NET 7):
// the range section map is the first, SystemDomain::m_pSystemDomain the 23rd. In: the memory, the table's address, the
// major version; out: what contract-descriptor.ts gives for .NET 10, so the same walk reads both.
import type { ContractDescriptor } from './contract-descriptor.js';
import type { ProcessMemory } from '../../target/process-memory.js';

/** Field offsets by type, as in .NET 8.0 and 9.0's codeman.h (x64 and arm64 alike: pointers and 32-bit flags). */
const layout: Record<string, Record<string, number>> = {
  RangeSectionMap: { TopLevelData: 0 },
  RangeSectionFragment: { Next: 0, RangeBegin: 8, RangeEndOpen: 16, RangeSection: 24 },
  RangeSection: { RangeBegin: 0, RangeEndOpen: 8, Flags: 16, R2RModule: 32, HeapList: 40, RangeList: 48 },
  CodeRangeMapRangeList: { RangeListType: 0x120 },
  CodeHeapListNode: { Next: 0, StartAddress: 16, EndAddress: 24, MapBase: 32, HeaderMap: 40 },
};

/**
 * Where the global loader allocator's stub heap is, by major: the allocator is a member of the SystemDomain (which
 * lives in libcoreclr.so's own data), its m_pStubHeap a member of the allocator (9 has one more data heap before it).
 * Read from the fixture's 8.0.31 and 9.0.20 (x64) against loaderallocator.hpp: the allocator starts with its vtable,
 * its reserved memory and its heaps' instances; m_pLowFrequencyHeap, m_pHighFrequencyHeap, (9: m_pStaticsHeap,)
 * m_pStubHeap follow, the stub heap the first executable one.
 */
const stubHeapLayout: Record<number, Record<string, Record<string, number>>> = {
  8: { SystemDomain: { GlobalLoaderAllocator: 0xa00 }, LoaderAllocator: { StubHeap: 0x3a0 } },
  9: { SystemDomain: { GlobalLoaderAllocator: 0x730 }, LoaderAllocator: { StubHeap: 0x438 } },
};

/** g_dacTable's slot of SystemDomain::m_pSystemDomain in 8 and 9 (dacvars.h; checked on x64). */
const systemDomainSlot = 22;

/** The majors whose layout is known. */
export const dacTableMajors: readonly number[] = [8, 9];

/**
 * A descriptor for a .NET 8 or 9 runtime whose `g_dacTable` is at `address`; throws for other versions. `partial` is
 * the runtime's own descriptor when it has one without the execution manager (.NET 9.0's): asked for what the fixed
 * layout does not give.
 */
export async function dacTableDescriptor(
  memory: ProcessMemory,
  address: bigint,
  major: number,
  partial?: ContractDescriptor,
): Promise<ContractDescriptor> {
  if (!dacTableMajors.includes(major)) throw new Error(`no known layout for .NET ${major}`);
  const slots = await memory.read(address, (systemDomainSlot + 1) * 8);
  const slot = (n: number) => new DataView(slots.buffer, slots.byteOffset, slots.byteLength).getBigUint64(n * 8, true);
  const globals: Record<string, bigint> = {
    ExecutionManagerCodeRangeMapAddress: slot(0),
    SystemDomain: slot(systemDomainSlot),
    StubCodeBlockLast: 0xfn,
  };
  const types = { ...layout, ...stubHeapLayout[major] };
  return {
    contracts: partial?.contracts ?? new Map(),
    jsonBytes: partial?.jsonBytes ?? 0,
    field: (type, field) =>
      Object.hasOwn(types, type) && Object.hasOwn(types[type]!, field)
        ? types[type]![field]
        : partial?.field(type, field),
    global: (name) => (Object.hasOwn(globals, name) ? globals[name] : partial?.global(name)),
  };
}

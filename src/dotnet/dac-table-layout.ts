// The execution manager's layout for .NET 8 and 9, which export no data descriptor: the offsets the runtime-stubs
// walk reads are fixed per major version (the same in 8 and 9, and the same as .NET 10.0's descriptor gives), and the
// one address it needs, the range section map, is the first slot of `g_dacTable` (the table of addresses libcoreclr.so
// exports for its debugger; slots are pointers since .NET 7). In: the memory, the table's address, the major version;
// out: what contract-descriptor.ts gives for .NET 10, so the same walk reads both.
import type { ContractDescriptor } from './contract-descriptor.js';
import type { ProcessMemory } from '../target/process-memory.js';

/** Field offsets by type, as in .NET 8.0 and 9.0's codeman.h (x64 and arm64 alike: pointers and 32-bit flags). */
const layout: Record<string, Record<string, number>> = {
  RangeSectionMap: { TopLevelData: 0 },
  RangeSectionFragment: { Next: 0, RangeBegin: 8, RangeEndOpen: 16, RangeSection: 24 },
  RangeSection: { RangeBegin: 0, RangeEndOpen: 8, Flags: 16, R2RModule: 32, HeapList: 40, RangeList: 48 },
  CodeRangeMapRangeList: { RangeListType: 0x120 },
  CodeHeapListNode: { Next: 0, StartAddress: 16, EndAddress: 24, MapBase: 32, HeaderMap: 40 },
};

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
  const slot = await memory.read(address, 8);
  const codeRangeMap = new DataView(slot.buffer, slot.byteOffset, 8).getBigUint64(0, true);
  const globals: Record<string, bigint> = {
    ExecutionManagerCodeRangeMapAddress: codeRangeMap,
    StubCodeBlockLast: 0xfn,
  };
  return {
    contracts: partial?.contracts ?? new Map(),
    jsonBytes: partial?.jsonBytes ?? 0,
    field: (type, field) =>
      Object.hasOwn(layout, type) && Object.hasOwn(layout[type]!, field)
        ? layout[type]![field]
        : partial?.field(type, field),
    global: (name) => (Object.hasOwn(globals, name) ? globals[name] : partial?.global(name)),
  };
}

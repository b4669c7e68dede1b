// The .NET runtime's data descriptor for out-of-process readers (the cDAC's "contract descriptor", .NET 10 and later),
// read from the target's memory: the exported `DotNetRuntimeContractDescriptor` holds a magic, flags, the size of and
// a pointer to a JSON text naming type layouts (field offsets) and globals, and an array of pointers the JSON refers
// to by index. Out: the offsets and globals as numbers, looked up by name. Everything here is the target's to forge,
// so the header's counts are capped, the JSON's size and nesting are bounded before it is parsed, and a field or
// global missing or of the wrong shape is undefined, never a guess.
import type { ProcessMemory } from '../../target/process-memory.js';

/** Bounds on what a descriptor may make profcpu read. */
export const descriptorLimits = Object.freeze({
  /** Largest JSON text (.NET 10.0's is about 10 KiB). */
  maxJsonBytes: 1 << 20,
  /** Deepest nesting of the JSON ({"types":{"T":{"F":[1,"t"]}}} is 4). */
  maxJsonDepth: 16,
  /** Most entries of the pointer array (.NET 10.0 has 24). */
  maxPointers: 4096,
});

/** The header's size on a 64-bit target: magic 8, flags 4, size 4, JSON pointer 8, count 4, pad 4, pointers 8. */
const headerBytes = 40;
const magic = 'DNCCDAC\0';

export class DescriptorError extends Error {
  override readonly name = 'DescriptorError';
}

export interface ContractDescriptor {
  /** Contract versions by name (`ExecutionManager: 2`). */
  contracts: ReadonlyMap<string, number>;
  /** Offset of `type`'s `field`, if the descriptor gives it. */
  field(type: string, field: string): number | undefined;
  /** Value of a global (a constant, or a pointer from the pointer array), if the descriptor gives it. */
  global(name: string): bigint | undefined;
  /** Size of the JSON text read, bytes. */
  jsonBytes: number;
}

/** Reads and parses the descriptor at `address` (the symbol's address plus the library's load bias). */
export async function readContractDescriptor(memory: ProcessMemory, address: bigint): Promise<ContractDescriptor> {
  const header = view(await memory.read(address, headerBytes));
  const magicText = Buffer.from(header.buffer, header.byteOffset, 8).toString('latin1');
  if (magicText !== magic) throw new DescriptorError('no contract descriptor magic');
  const flags = header.getUint32(8, true);
  // Flag bit 0 is always set; bit 1 set means 4-byte pointers (a 32-bit target), which profcpu does not profile.
  if ((flags & 1) === 0 || (flags & 2) !== 0) throw new DescriptorError(`descriptor flags 0x${flags.toString(16)}`);
  const jsonBytes = header.getUint32(12, true);
  const jsonAddress = header.getBigUint64(16, true);
  const pointerCount = header.getUint32(24, true);
  const pointersAddress = header.getBigUint64(32, true);
  if (jsonBytes === 0 || jsonBytes > descriptorLimits.maxJsonBytes)
    throw new DescriptorError(`a JSON text of ${jsonBytes} bytes (at most ${descriptorLimits.maxJsonBytes})`);
  if (pointerCount > descriptorLimits.maxPointers)
    throw new DescriptorError(`${pointerCount} pointers (at most ${descriptorLimits.maxPointers})`);
  const text = Buffer.from(await memory.read(jsonAddress, jsonBytes)).toString('utf8');
  const pointerBytes = pointerCount > 0 ? view(await memory.read(pointersAddress, pointerCount * 8)) : undefined;
  const pointers: bigint[] = [];
  for (let i = 0; i < pointerCount; i++) pointers.push(pointerBytes!.getBigUint64(i * 8, true));
  return parseDescriptorJson(text, pointers);
}

/** The descriptor from its JSON text and pointer array (separate for tests). */
export function parseDescriptorJson(text: string, pointers: readonly bigint[]): ContractDescriptor {
  checkDepth(text);
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new DescriptorError(`the descriptor's JSON does not parse (${(error as Error).message})`);
  }
  if (!isObject(json)) throw new DescriptorError('the descriptor’s JSON is not an object');
  const types = isObject(json['types']) ? json['types'] : {};
  const globals = isObject(json['globals']) ? json['globals'] : {};
  const contracts = new Map<string, number>();
  if (isObject(json['contracts']))
    for (const [name, version] of Object.entries(json['contracts']))
      if (typeof version === 'number') contracts.set(name, version);
  return {
    contracts,
    jsonBytes: Buffer.byteLength(text),
    field(type, field) {
      const layout = own(types, type);
      if (!isObject(layout)) return undefined;
      // A field is an offset, or [offset, type name].
      const value = own(layout, field);
      const offset = Array.isArray(value) ? value[0] : value;
      return typeof offset === 'number' && Number.isSafeInteger(offset) && offset >= 0 && offset < 1 << 20
        ? offset
        : undefined;
    },
    global(name) {
      // A global is a value, or [value, type name]; a value is a number, a numeric string, or [index] into the
      // pointer array.
      const entry = own(globals, name);
      const value = Array.isArray(entry) && entry.length === 2 && typeof entry[1] === 'string' ? entry[0] : entry;
      if (Array.isArray(value)) {
        const index = value[0];
        return value.length === 1 && typeof index === 'number' && Number.isInteger(index) && index >= 0
          ? pointers[index]
          : undefined;
      }
      return toBigInt(value);
    },
  };
}

/** Refuses JSON nested deeper than the limit, before JSON.parse builds it. */
function checkDepth(text: string): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      if (++depth > descriptorLimits.maxJsonDepth)
        throw new DescriptorError(`the descriptor's JSON nests deeper than ${descriptorLimits.maxJsonDepth}`);
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
}

function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value >= 0 ? BigInt(value) : undefined;
  if (typeof value !== 'string' || !/^(0x[0-9a-f]{1,16}|[0-9]{1,20})$/i.test(value)) return undefined;
  const n = BigInt(value);
  return n <= 0xffff_ffff_ffff_ffffn ? n : undefined;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** `object[key]` if it is the object's own (the target names the keys: `__proto__` must not reach the prototype). */
function own(object: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}

function view(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

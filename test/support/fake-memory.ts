// A fake process memory for the runtime-stubs tests: regions of bytes at chosen addresses, read through the same
// MemoryBudget as the real /proc/PID/mem reader, so that limits and deadlines bind the same way. Reads that touch
// bytes outside every region fail as unmapped memory does.
import {
  MemoryBudget,
  MemoryReadError,
  type MemoryLimits,
  type ProcessMemory,
} from '../../src/target/process-memory.js';

export class FakeMemory implements ProcessMemory {
  readonly budget: MemoryBudget;
  /** Mapped regions; a read is served by the first that holds all its bytes, so earlier ones override later. */
  readonly regions: { start: bigint; bytes: Buffer }[] = [];

  constructor(limits: Partial<MemoryLimits> = {}, signal?: AbortSignal) {
    this.budget = new MemoryBudget(limits, signal);
  }

  /** Maps `bytes` at `start`. */
  map(start: bigint, bytes: Uint8Array): this {
    this.regions.push({ start, bytes: Buffer.from(bytes) });
    return this;
  }

  /** Maps `count` 64-bit little-endian words at `start`. */
  words(start: bigint, values: readonly bigint[]): this {
    const bytes = Buffer.alloc(values.length * 8);
    values.forEach((v, i) => bytes.writeBigUInt64LE(BigInt.asUintN(64, v), i * 8));
    return this.map(start, bytes);
  }

  get bytesRead(): number {
    return this.budget.bytesRead;
  }

  get reads(): number {
    return this.budget.reads;
  }

  async read(address: bigint, length: number): Promise<Uint8Array> {
    this.budget.charge(address, length);
    for (const r of this.regions) {
      if (address >= r.start && address + BigInt(length) <= r.start + BigInt(r.bytes.length)) {
        const at = Number(address - r.start);
        return r.bytes.subarray(at, at + length);
      }
    }
    throw new MemoryReadError(`${length} bytes at 0x${address.toString(16)} are not mapped`);
  }
}

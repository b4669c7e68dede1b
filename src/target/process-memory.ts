// Reading a live process's memory, read-only and bounded: /proc/PID/mem read with pread at absolute addresses, each
// read capped, all reads of one session under a byte budget and a deadline, and stopped by an AbortSignal. Every byte
// read is the target's to choose, so callers treat it as untrusted; this module only makes sure that reading it
// cannot take unbounded time or memory. A process that cannot be read (ptrace access refused: another user, a
// Yama ptrace_scope, no CAP_SYS_PTRACE across namespaces) is a MemoryAccessError with the reason, raised on open.
import { open, type FileHandle } from 'node:fs/promises';
import { ProfcpuError } from '../error.js';
import { procPath, type ProcfsOptions } from './procfs.js';

/** Random access to a process's memory at absolute addresses; what the stub reader needs, and what tests fake. */
export interface ProcessMemory {
  /** `length` bytes at `address`; throws MemoryReadError when any of them cannot be read or a budget is spent. */
  read(address: bigint, length: number): Promise<Uint8Array>;
  /** Bytes handed out so far, and reads made. */
  readonly bytesRead: number;
  readonly reads: number;
}

export interface MemoryLimits {
  /** Largest single read. Default 1 MiB. */
  maxReadBytes: number;
  /** Bytes read in all at most. Default 64 MiB. */
  maxTotalBytes: number;
  /** Reads made in all at most. Default 1 000 000. */
  maxReads: number;
  /** Time the whole session may take, ms. Default 10 s. */
  timeoutMs: number;
}

export const memoryLimitDefaults: Readonly<MemoryLimits> = Object.freeze({
  maxReadBytes: 1 << 20,
  maxTotalBytes: 64 << 20,
  maxReads: 1_000_000,
  timeoutMs: 10_000,
});

/**
 * Addresses read at most: the largest a read position holds exactly as a number. Above x86-64's 4-level user space
 * (2^47) and arm64's (2^52); with 5-level paging (LA57, up to 2^56) the kernel maps above 2^47 only where a program
 * asks for it, which the .NET runtime does not.
 */
export const maxReadAddress = 1n << 53n;

/** A read that failed: unmapped or unreadable memory, or a limit reached (`limit` set: reading on is pointless). */
export class MemoryReadError extends Error {
  override readonly name = 'MemoryReadError';
  constructor(
    message: string,
    readonly limit = false,
  ) {
    super(message);
  }
}

/** The limits and the signal shared by every reader of one session, so that fakes and the real one bound alike. */
export class MemoryBudget {
  readonly limits: MemoryLimits;
  bytesRead = 0;
  reads = 0;
  private readonly deadline: number;

  constructor(
    limits: Partial<MemoryLimits> = {},
    private readonly signal?: AbortSignal,
  ) {
    this.limits = { ...memoryLimitDefaults, ...limits };
    this.deadline = Date.now() + this.limits.timeoutMs;
  }

  /** Throws when a read of `length` bytes at `address` must not be made; counts it otherwise. */
  charge(address: bigint, length: number): void {
    if (this.signal?.aborted) throw new MemoryReadError('stopped', true);
    if (Date.now() > this.deadline) throw new MemoryReadError(`the ${this.limits.timeoutMs} ms to read are over`, true);
    if (!Number.isSafeInteger(length) || length < 0 || length > this.limits.maxReadBytes)
      throw new MemoryReadError(`a read of ${length} bytes is larger than ${this.limits.maxReadBytes}`, true);
    if (address < 0n || address + BigInt(length) > maxReadAddress)
      throw new MemoryReadError(`address 0x${address.toString(16)} is outside the address space`);
    if (this.reads >= this.limits.maxReads) throw new MemoryReadError(`${this.limits.maxReads} reads made`, true);
    if (this.bytesRead + length > this.limits.maxTotalBytes)
      throw new MemoryReadError(`the ${this.limits.maxTotalBytes} bytes to read are read`, true);
    this.reads++;
    this.bytesRead += length;
  }
}

/** A process's memory through /proc/PID/mem. Close it when done. */
export class ProcMemory implements ProcessMemory {
  private constructor(
    private readonly file: FileHandle,
    private readonly budget: MemoryBudget,
  ) {}

  /** Opens /proc/PID/mem for reading; a refusal is a ProfcpuError (PREFLIGHT_FAILED) saying why. */
  static async open(pid: number, budget: MemoryBudget, options: ProcfsOptions = {}): Promise<ProcMemory> {
    const path = procPath(pid, 'mem', options);
    try {
      return new ProcMemory(await open(path, 'r'), budget);
    } catch (cause) {
      const code = (cause as NodeJS.ErrnoException).code ?? String(cause);
      throw new ProfcpuError('PREFLIGHT_FAILED', `cannot read the memory of process ${pid} (${code})`, {
        cause,
        remedy:
          code === 'EACCES' || code === 'EPERM'
            ? 'Reading another process’s memory needs ptrace access: run profcpu as root with CAP_SYS_PTRACE ' +
              '(a sidecar started with --cap-add SYS_PTRACE), or as the target’s user with kernel.yama.ptrace_scope 0.'
            : undefined,
      });
    }
  }

  get bytesRead(): number {
    return this.budget.bytesRead;
  }

  get reads(): number {
    return this.budget.reads;
  }

  async read(address: bigint, length: number): Promise<Uint8Array> {
    this.budget.charge(address, length);
    const buffer = Buffer.alloc(length);
    let done = 0;
    while (done < length) {
      let n: number;
      try {
        // Exact as a number: charge() refuses addresses from 2^53 on. (Node 20's FileHandle.read takes a bigint
        // position but reads at the file's current position instead, 0 here.)
        ({ bytesRead: n } = await this.file.read(buffer, done, length - done, Number(address) + done));
      } catch (cause) {
        const code = (cause as NodeJS.ErrnoException).code ?? String(cause);
        throw new MemoryReadError(`cannot read ${length} bytes at 0x${address.toString(16)} (${code})`);
      }
      if (n === 0) throw new MemoryReadError(`${length} bytes at 0x${address.toString(16)} are not all mapped`);
      done += n;
    }
    return buffer;
  }

  async close(): Promise<void> {
    await this.file.close();
  }
}

// Decoding of the kernel's records that profcpu uses (MMAP, MMAP2, COMM, FORK, EXIT, SAMPLE, LOST, LOST_SAMPLES,
// SWITCH, SWITCH_CPU_WIDE) from one whole record's bytes and the attributes of the recording: gives plain events.
// The layout of a sample depends on its attribute's sample_type; other records end with a sample_id trailer (pid/tid,
// time, id, cpu...) when the attribute has sample_id_all. Every field read is bounds-checked against the record's
// size; a record too short for what its attribute says it holds is refused (RecordError), which the reader reports
// with the record's offset.
import { branchHwIndex, type EventAttr, limits, misc, readBit, recordType, sampleBit } from './format.js';

export interface MmapEvent extends At {
  kind: 'mmap';
  pid: number;
  tid: number;
  start: bigint;
  length: bigint;
  pgoff: bigint;
  filename: string;
  /** Lower-case hex, when the record carries one (MMAP2 with --buildid-mmap). */
  buildId: string | undefined;
  /** PROT_* of the mapping (MMAP2); MMAP records are executable mappings. */
  prot: number | undefined;
  cpumode: number;
  time: PerfTime | undefined;
}

export interface CommEvent extends At {
  kind: 'comm';
  pid: number;
  tid: number;
  comm: string;
  /** The comm changed because the process exec'd. */
  exec: boolean;
  time: PerfTime | undefined;
}

export interface TaskEvent extends At {
  kind: 'fork' | 'exit';
  pid: number;
  ppid: number;
  tid: number;
  ptid: number;
  /** A fork perf synthesized for a process that ran before the recording (PERF_RECORD_MISC_FORK_EXEC): its mappings
   * follow in their own records, so the parent's are not copied. */
  exec: boolean;
  time: PerfTime | undefined;
}

export interface SampleEvent extends At {
  kind: 'sample';
  /** Index of the sample's attribute in the recording's attributes. */
  attr: number;
  cpumode: number;
  ip: bigint;
  pid: number;
  tid: number;
  time: PerfTime | undefined;
  cpu: number | undefined;
  /** A number while exact (below 2^53), as times. */
  period: number | bigint;
  /** The callchain as recorded, context markers included (PERF_CONTEXT_KERNEL...), capped at maxCallchain. */
  callchain: BigUint64Array | undefined;
  /**
   * The counter values of a PERF_SAMPLE_READ sample, by sample id (one per group member with PERF_FORMAT_GROUP):
   * perf script makes one sample of each, of the member's event, its period what the value grew by (reader.ts).
   */
  reads?: { id: number | bigint; value: number | bigint }[];
  /** The user registers of a PERF_SAMPLE_REGS_USER sample (perf record --call-graph dwarf). */
  userRegs?: UserRegs;
  /**
   * The user stack of a PERF_SAMPLE_STACK_USER sample: the bytes the kernel copied from the sampled sp upward, its
   * dyn_size of them (empty when it copied none). A view of the record's buffer, which nothing writes to again.
   */
  userStack?: Uint8Array;
}

export interface UserRegs {
  /** PERF_SAMPLE_REGS_ABI_* (regsAbi): none (0, a kernel thread: no values), 32 or 64-bit. */
  abi: number;
  /** The attribute's sample_regs_user: bit n set when register n is in `values`. */
  mask: bigint;
  /** One value per bit set in `mask`, in bit order: empty when `abi` is none. */
  values: BigUint64Array;
}

/** The value of perf register `register` (x86: perfReg numbers) in `regs`, or undefined when not recorded. */
export function userRegister(regs: UserRegs, register: number): bigint | undefined {
  const bit = 1n << BigInt(register);
  if (!(regs.mask & bit)) return undefined;
  let index = 0;
  for (let below = regs.mask & (bit - 1n); below; below &= below - 1n) index++;
  return regs.values[index];
}

/**
 * A context switch of a thread (PERF_RECORD_SWITCH, or SWITCH_CPU_WIDE): `out` of the CPU, preempted (still
 * runnable) or blocked, or back `in`. The thread is the record's sample_id's; a CPU-wide record also names the thread
 * on the other side of the switch (the one coming in when this one goes out, and the other way).
 */
export interface SwitchEvent extends At {
  kind: 'switch';
  out: boolean;
  /** Switched out while still runnable: preempted, not blocked. */
  preempted: boolean;
  pid: number;
  tid: number;
  /** SWITCH_CPU_WIDE: the other thread of the switch. */
  other: { pid: number; tid: number } | undefined;
  time: PerfTime | undefined;
  cpu: number | undefined;
}

export interface LostEvent extends At {
  kind: 'lost';
  lost: bigint;
  time: PerfTime | undefined;
}

/** Where the record lies in the file (or stream), for messages and comparisons with `perf script -D`. */
interface At {
  offset: number;
}

export type PerfEvent = MmapEvent | CommEvent | TaskEvent | SampleEvent | LostEvent | SwitchEvent;

/**
 * A record's time, in ns since boot: a number while it is exact (below 2^53 ns, 104 days of uptime), a bigint past
 * that. The bulk of the records then carry no bigint (each would be an object to make and to compare); a server up
 * longer keeps its exact times. `<` and `>` compare the two kinds exactly.
 */
export type PerfTime = number | bigint;

const exactU64 = 1n << 53n;

/** The u64 at `at`, as a number when it is exact (below 2^53), else as a bigint. */
export function readU64(record: Buffer, at: number): number | bigint {
  const high = record.readUInt32LE(at + 4);
  return high < 0x200000 ? high * 0x100000000 + record.readUInt32LE(at) : record.readBigUInt64LE(at);
}

export class RecordError extends Error {}

/** How the reader finds a record's attribute and time: computed once per recording. */
export class RecordLayout {
  /** Attribute indexes by sample id, read as readU64 reads it (ids are small numbers: keys made with no bigint). */
  readonly byId = new Map<number | bigint, number>();
  /** Where the id lies: idPos and isPos of the events (the same for all, checked below). */
  private readonly idPos: number;
  private readonly isPos: number;

  constructor(readonly attrs: readonly EventAttr[]) {
    attrs.forEach((attr, index) => {
      for (const id of attr.ids) {
        const key = id < exactU64 ? Number(id) : id;
        if (!this.byId.has(key)) this.byId.set(key, index);
      }
    });
    // perf refuses recordings whose events put the id at different places; so does this reader.
    const first = attrs[0];
    if (first)
      for (const attr of attrs)
        if (idPos(attr.sampleType) !== idPos(first.sampleType) || isPos(attr.sampleType) !== isPos(first.sampleType))
          throw new RecordError('its events place their sample ids differently');
    this.idPos = first ? idPos(first.sampleType) : -1;
    this.isPos = first?.sampleIdAll ? isPos(first.sampleType) : -1;
  }

  /** The attribute of a sample, or -1 when its id names none. */
  sampleAttr(record: Buffer): number {
    if (this.attrs.length === 1) return 0;
    const pos = this.idPos;
    if (pos < 0 || 8 + pos * 8 + 8 > record.length) return -1;
    return this.byId.get(readU64(record, 8 + pos * 8)) ?? -1;
  }

  /** The attribute of a non-sample record (from its trailer's id), or -1 when its id names none. */
  otherAttr(record: Buffer): number {
    if (this.attrs.length === 1) return 0;
    const pos = this.isPos;
    if (pos < 0 || record.length < 8 + pos * 8) return -1;
    return this.byId.get(readU64(record, record.length - pos * 8)) ?? -1;
  }

  /**
   * The thread (pid, tid) and CPU in a non-sample record's trailer, each undefined when the trailer has none: the
   * thread of a SWITCH record is only there.
   */
  otherTask(record: Buffer): { pid: number; tid: number; cpu: number | undefined } | undefined {
    const attr = this.attrs[this.otherAttr(record)];
    if (!attr?.sampleIdAll || !(attr.sampleType & sampleBit.tid)) return undefined;
    const start = record.length - trailerWords(attr.sampleType) * 8;
    if (start < 8) throw new RecordError('a record too short for its sample id');
    let cpuAt = start + 8;
    for (const bit of [sampleBit.time, sampleBit.id, sampleBit.streamId]) if (attr.sampleType & bit) cpuAt += 8;
    return {
      pid: record.readInt32LE(start),
      tid: record.readInt32LE(start + 4),
      cpu: attr.sampleType & sampleBit.cpu ? record.readUInt32LE(cpuAt) : undefined,
    };
  }

  /** The time in a non-sample record's trailer, or undefined when it has none. */
  otherTime(record: Buffer): PerfTime | undefined {
    const attr = this.attrs[this.otherAttr(record)];
    if (!attr?.sampleIdAll || !(attr.sampleType & sampleBit.time)) return undefined;
    const words = trailerWords(attr.sampleType);
    const at = record.length - words * 8 + (attr.sampleType & sampleBit.tid ? 8 : 0);
    if (at < 8) throw new RecordError('a record too short for its sample id');
    return readU64(record, at);
  }
}

/** u64 words before the id in a sample, or -1 without one (perf's id_pos). */
function idPos(type: bigint): number {
  if (type & sampleBit.identifier) return 0;
  if (!(type & sampleBit.id)) return -1;
  let pos = 0;
  for (const bit of [sampleBit.ip, sampleBit.tid, sampleBit.time, sampleBit.addr]) if (type & bit) pos++;
  return pos;
}

/** u64 words from the end of a sample_id trailer to its id, or -1 without one (perf's is_pos). */
function isPos(type: bigint): number {
  if (type & sampleBit.identifier) return 1;
  if (!(type & sampleBit.id)) return -1;
  let pos = 1;
  if (type & sampleBit.cpu) pos++;
  if (type & sampleBit.streamId) pos++;
  return pos;
}

function trailerWords(type: bigint): number {
  let words = 0;
  for (const bit of [
    sampleBit.tid,
    sampleBit.time,
    sampleBit.id,
    sampleBit.streamId,
    sampleBit.cpu,
    sampleBit.identifier,
  ])
    if (type & bit) words++;
  return words;
}

const bit = Object.freeze({
  ip: Number(sampleBit.ip),
  tid: Number(sampleBit.tid),
  time: Number(sampleBit.time),
  addr: Number(sampleBit.addr),
  read: Number(sampleBit.read),
  callchain: Number(sampleBit.callchain),
  id: Number(sampleBit.id),
  cpu: Number(sampleBit.cpu),
  period: Number(sampleBit.period),
  streamId: Number(sampleBit.streamId),
  identifier: Number(sampleBit.identifier),
  raw: Number(sampleBit.raw),
  branchStack: Number(sampleBit.branchStack),
  regsUser: Number(sampleBit.regsUser),
  stackUser: Number(sampleBit.stackUser),
});

/** Entries of a callchain slab. */
const slabEntries = 1 << 16;

/**
 * Where one reading copies the callchains it cannot view where they lie (a record whose callchain is not 8-byte
 * aligned in its buffer, as a pipe's may be): into slabs of 64K entries rather than each into an array of its own (an
 * array buffer each is an allocation outside the heap, slow to make and to collect). A slab lives while a sample holds
 * part of it.
 */
export class CallchainSlab {
  private slab = new BigUint64Array(slabEntries);
  /** The slab's bytes, copied into without a view per callchain. */
  private bytes = new Uint8Array(this.slab.buffer);
  private used = 0;

  /** `entries` u64s of `record` from `at` on: a view of them where they lie when aligned, else a copy. */
  view(record: Buffer, at: number, entries: number): BigUint64Array {
    const offset = record.byteOffset + at;
    // The record is a view of the chunk read (or a buffer of its own), which nothing writes to again.
    return offset % 8 === 0 ? new BigUint64Array(record.buffer, offset, entries) : this.copy(record, at, entries);
  }

  /** A copy of `entries` u64s of `record` from `at` on. */
  copy(record: Buffer, at: number, entries: number): BigUint64Array {
    if (this.used + entries > slabEntries) {
      this.slab = new BigUint64Array(Math.max(slabEntries, entries));
      this.bytes = new Uint8Array(this.slab.buffer);
      this.used = 0;
    }
    record.copy(this.bytes, this.used * 8, at, at + entries * 8);
    const chain = this.slab.subarray(this.used, this.used + entries);
    this.used += entries;
    return chain;
  }
}

/**
 * Decodes a SAMPLE record of attribute `attrIndex`: its callchain is a view into the record's buffer, or copied
 * into `slab` (see CallchainSlab.view).
 */
export function decodeSample(
  record: Buffer,
  attrIndex: number,
  attr: EventAttr,
  slab: CallchainSlab = new CallchainSlab(),
): SampleEvent {
  // The bits as a number (perf's are all below 2^32): each bigint operation would make an object.
  const type = Number(attr.sampleType & 0xffffffffn);
  const end = record.length;
  const short = () => new RecordError('a sample shorter than its fields');
  let at = 8;
  if (type & bit.identifier) at += 8;
  let ip = 0n;
  if (type & bit.ip) {
    if (at + 8 > end) throw short();
    ip = record.readBigUInt64LE(at);
    at += 8;
  }
  let pid = -1;
  let tid = -1;
  if (type & bit.tid) {
    if (at + 8 > end) throw short();
    pid = record.readInt32LE(at);
    tid = record.readInt32LE(at + 4);
    at += 8;
  }
  let time: PerfTime | undefined;
  if (type & bit.time) {
    if (at + 8 > end) throw short();
    time = readU64(record, at);
    at += 8;
  }
  if (type & bit.addr) at += 8;
  if (type & bit.id) at += 8;
  if (type & bit.streamId) at += 8;
  let cpu: number | undefined;
  if (type & bit.cpu) {
    if (at + 8 > end) throw short();
    cpu = record.readUInt32LE(at);
    at += 8;
  }
  // Without its own period a sample has its event's (perf's evsel__parse_sample).
  let period: number | bigint = attr.samplePeriod < exactU64 ? Number(attr.samplePeriod) : attr.samplePeriod;
  if (type & bit.period) {
    if (at + 8 > end) throw short();
    period = readU64(record, at);
    at += 8;
  }
  let reads: SampleEvent['reads'];
  if (type & bit.read) {
    const read = readValues(attr.readFormat, record, at, short);
    reads = read.values;
    at += read.bytes;
  }
  let callchain: BigUint64Array | undefined;
  if (type & bit.callchain) {
    if (at + 8 > end) throw short();
    // An entry count past 2^32 is longer than any record: its high word alone says so.
    const nr = record.readUInt32LE(at + 4) === 0 ? record.readUInt32LE(at) : Number.POSITIVE_INFINITY;
    at += 8;
    if (nr > Math.floor((end - at) / 8)) throw new RecordError('a callchain longer than its sample');
    callchain = slab.view(record, at, Math.min(nr, limits.maxCallchain));
    at += nr * 8;
  }
  // The fields after the callchain are read only for the user registers and stack (perf record --call-graph dwarf).
  const user = type & (bit.regsUser | bit.stackUser) ? decodeUser(record, at, type, attr, slab) : undefined;
  return {
    kind: 'sample',
    offset: 0,
    attr: attrIndex,
    cpumode: record.readUInt16LE(4) & misc.cpumodeMask,
    ip,
    pid,
    tid,
    time,
    cpu,
    period,
    callchain,
    ...(reads && { reads }),
    ...(user?.regs && { userRegs: user.regs }),
    ...(user?.stack && { userStack: user.stack }),
  };
}

/**
 * The REGS_USER and STACK_USER fields of a sample, the fields after its callchain starting at `at`: RAW and
 * BRANCH_STACK are skipped on the way (perf's evsel__parse_sample reads them in this order).
 */
function decodeUser(
  record: Buffer,
  at: number,
  type: number,
  attr: EventAttr,
  slab: CallchainSlab,
): { regs: UserRegs | undefined; stack: Uint8Array | undefined } {
  const end = record.length;
  const need = (bytes: number, what: string) => {
    if (bytes > end - at) throw new RecordError(`a sample shorter than its ${what}`);
  };
  if (type & bit.raw) {
    // A u32 size, then the data: the two together padded to 8 bytes by the kernel (the size says so).
    need(4, 'raw data');
    const size = record.readUInt32LE(at);
    at += 4;
    need(size, 'raw data');
    at += size;
  }
  if (type & bit.branchStack) {
    need(8, 'branch stack');
    const nr = record.readUInt32LE(at + 4) === 0 ? record.readUInt32LE(at) : Number.POSITIVE_INFINITY;
    at += 8;
    if (attr.branchSampleType & branchHwIndex) at += 8;
    // Each entry is from, to and flags: 24 bytes.
    need(nr * 24, 'branch stack');
    at += nr * 24;
  }
  let regs: UserRegs | undefined;
  if (type & bit.regsUser) {
    need(8, 'user registers');
    const abi = record.readUInt32LE(at + 4) === 0 ? record.readUInt32LE(at) : -1;
    at += 8;
    const mask = attr.sampleRegsUser;
    let count = 0;
    if (abi !== 0) for (let rest = mask; rest; rest &= rest - 1n) count++;
    need(count * 8, 'user registers');
    regs = { abi, mask, values: count === 0 ? emptyValues : slab.view(record, at, count) };
    at += count * 8;
  }
  let stack: Uint8Array | undefined;
  if (type & bit.stackUser) {
    need(8, 'user stack');
    const size = record.readUInt32LE(at + 4) === 0 ? record.readUInt32LE(at) : Number.POSITIVE_INFINITY;
    at += 8;
    if (size === 0) stack = emptyStack;
    else {
      need(size + 8, 'user stack');
      const dynamic = record.readBigUInt64LE(at + size);
      // perf refuses the sample too ("user stack dump failure"): the kernel never copies more than it reserved.
      if (dynamic > BigInt(size)) throw new RecordError('a user stack whose dynamic size exceeds its size');
      stack = record.subarray(at, at + Number(dynamic));
    }
  }
  return { regs, stack };
}

const emptyValues = new BigUint64Array(0);
const emptyStack = new Uint8Array(0);

/**
 * The values of a sample's READ field at `at` with their ids, and the field's bytes: a group's members, or the event's
 * one value. Without PERF_FORMAT_ID the id is 0, which names no event (perf counts such a sample as of an unknown id).
 */
function readValues(
  format: bigint,
  record: Buffer,
  at: number,
  short: () => RecordError,
): { values: NonNullable<SampleEvent['reads']>; bytes: number } {
  const hasId = (format & readBit.id) !== 0n;
  const perValue = 1 + (hasId ? 1 : 0) + (format & readBit.lost ? 1 : 0);
  const times = (format & readBit.totalTimeEnabled ? 1 : 0) + (format & readBit.totalTimeRunning ? 1 : 0);
  if (!(format & readBit.group)) {
    // value, the times, id, lost.
    const bytes = (perValue + times) * 8;
    if (at + bytes > record.length) throw short();
    const value = readU64(record, at);
    return { values: [{ id: hasId ? readU64(record, at + (1 + times) * 8) : 0, value }], bytes };
  }
  // nr, the times, then {value, id, lost} per member.
  if (at + 8 > record.length) throw new RecordError('a sample shorter than its read values');
  const nr = record.readBigUInt64LE(at);
  if (nr > BigInt(record.length)) throw new RecordError('a read group larger than its sample');
  const count = Number(nr);
  const bytes = (1 + times + count * perValue) * 8;
  if (at + bytes > record.length) throw short();
  const values: NonNullable<SampleEvent['reads']> = [];
  for (let i = 0, v = at + (1 + times) * 8; i < count; i++, v += perValue * 8)
    values.push({ value: readU64(record, v), id: hasId ? readU64(record, v + 8) : 0 });
  return { values, bytes };
}

/**
 * Decodes one of the side-band records profcpu uses, or undefined for other types. `task` reads the record's
 * sample_id trailer for its thread (RecordLayout.otherTask), which only SWITCH records need.
 */
export function decodeOther(
  record: Buffer,
  type: number,
  time: PerfTime | undefined,
  task?: () => { pid: number; tid: number; cpu: number | undefined } | undefined,
): PerfEvent | undefined {
  const recordMisc = record.readUInt16LE(4);
  const need = (n: number) => {
    if (n > record.length) throw new RecordError(`a record of type ${type} shorter than its fields`);
  };
  switch (type) {
    case recordType.mmap:
      need(40);
      return decodeMmap(record, time, 40, undefined, undefined);
    case recordType.mmap2: {
      need(72);
      const buildId =
        recordMisc & misc.mmapBuildId ? record.toString('hex', 44, 44 + Math.min(record[40]!, 20)) : undefined;
      return decodeMmap(record, time, 72, buildId, record.readUInt32LE(64));
    }
    case recordType.comm:
      need(16);
      return {
        kind: 'comm',
        offset: 0,
        pid: record.readInt32LE(8),
        tid: record.readInt32LE(12),
        comm: cString(record, 16),
        exec: (recordMisc & misc.commExec) !== 0,
        time,
      };
    case recordType.fork:
    case recordType.exit:
      need(32);
      return {
        kind: type === recordType.fork ? 'fork' : 'exit',
        offset: 0,
        pid: record.readInt32LE(8),
        ppid: record.readInt32LE(12),
        tid: record.readInt32LE(16),
        ptid: record.readInt32LE(20),
        exec: (recordMisc & misc.forkExec) !== 0,
        time,
      };
    case recordType.lost:
      need(24);
      return { kind: 'lost', offset: 0, lost: record.readBigUInt64LE(16), time };
    case recordType.lostSamples:
      need(16);
      return { kind: 'lost', offset: 0, lost: record.readBigUInt64LE(8), time };
    case recordType.switch:
    case recordType.switchCpuWide: {
      const cpuWide = type === recordType.switchCpuWide;
      if (cpuWide) need(16);
      // Without a thread in its trailer (no sample_id_all, or no TID), a switch says nothing usable.
      const thread = task?.();
      if (!thread) return undefined;
      return {
        kind: 'switch',
        offset: 0,
        out: (recordMisc & misc.switchOut) !== 0,
        preempted: (recordMisc & misc.switchOut) !== 0 && (recordMisc & misc.switchOutPreempt) !== 0,
        pid: thread.pid,
        tid: thread.tid,
        other: cpuWide ? { pid: record.readInt32LE(8), tid: record.readInt32LE(12) } : undefined,
        time,
        cpu: thread.cpu,
      };
    }
    default:
      return undefined;
  }
}

/**
 * MMAP and MMAP2 share their first fields (pid, tid, start, length, pgoff); the file name follows MMAP's at 40 and
 * MMAP2's at 72, after its device, inode, protection and flags (or build-id).
 */
function decodeMmap(
  record: Buffer,
  time: PerfTime | undefined,
  filenameAt: number,
  buildId: string | undefined,
  prot: number | undefined,
): MmapEvent {
  return {
    kind: 'mmap',
    offset: 0,
    pid: record.readInt32LE(8),
    tid: record.readInt32LE(12),
    start: record.readBigUInt64LE(16),
    length: record.readBigUInt64LE(24),
    pgoff: record.readBigUInt64LE(32),
    filename: cString(record, filenameAt),
    buildId,
    prot,
    cpumode: record.readUInt16LE(4) & misc.cpumodeMask,
    time,
  };
}

/** A NUL-terminated string from `at` to the record's end (the sample_id trailer comes after the NUL). */
function cString(record: Buffer, at: number): string {
  const nul = record.indexOf(0, at);
  return record.toString('utf8', at, nul < 0 ? record.length : nul);
}

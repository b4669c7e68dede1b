// Decoding of the kernel's records that profcpu uses (MMAP, MMAP2, COMM, FORK, EXIT, SAMPLE, LOST, LOST_SAMPLES) from
// one whole record's bytes and the attributes of the recording: gives plain events. The layout of a sample depends on
// its attribute's sample_type; other records end with a sample_id trailer (pid/tid, time, id, cpu...) when the
// attribute has sample_id_all. Every field read is bounds-checked against the record's size; a record too short for
// what its attribute says it holds is refused (RecordError), which the reader reports with the record's offset.
import { type EventAttr, limits, misc, readBit, recordType, sampleBit } from './format.js';

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
  time: bigint | undefined;
}

export interface CommEvent extends At {
  kind: 'comm';
  pid: number;
  tid: number;
  comm: string;
  /** The comm changed because the process exec'd. */
  exec: boolean;
  time: bigint | undefined;
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
  time: bigint | undefined;
}

export interface SampleEvent extends At {
  kind: 'sample';
  /** Index of the sample's attribute in the recording's attributes. */
  attr: number;
  cpumode: number;
  ip: bigint;
  pid: number;
  tid: number;
  time: bigint | undefined;
  cpu: number | undefined;
  period: bigint;
  /** The callchain as recorded, context markers included (PERF_CONTEXT_KERNEL...), capped at maxCallchain. */
  callchain: BigUint64Array | undefined;
}

export interface LostEvent extends At {
  kind: 'lost';
  lost: bigint;
  time: bigint | undefined;
}

/** Where the record lies in the file (or stream), for messages and comparisons with `perf script -D`. */
interface At {
  offset: number;
}

export type PerfEvent = MmapEvent | CommEvent | TaskEvent | SampleEvent | LostEvent;

export class RecordError extends Error {}

/** How the reader finds a record's attribute and time: computed once per recording. */
export class RecordLayout {
  readonly byId = new Map<bigint, number>();

  constructor(readonly attrs: readonly EventAttr[]) {
    attrs.forEach((attr, index) => {
      for (const id of attr.ids) if (!this.byId.has(id)) this.byId.set(id, index);
    });
    // perf refuses recordings whose events put the id at different places; so does this reader.
    const first = attrs[0];
    if (first)
      for (const attr of attrs)
        if (idPos(attr.sampleType) !== idPos(first.sampleType) || isPos(attr.sampleType) !== isPos(first.sampleType))
          throw new RecordError('its events place their sample ids differently');
  }

  /** The attribute of a sample, or -1 when its id names none. */
  sampleAttr(record: Buffer): number {
    if (this.attrs.length === 1) return 0;
    const pos = idPos(this.attrs[0]!.sampleType);
    if (pos < 0 || 8 + pos * 8 + 8 > record.length) return -1;
    return this.byId.get(record.readBigUInt64LE(8 + pos * 8)) ?? -1;
  }

  /** The attribute of a non-sample record (from its trailer's id), or -1 when its id names none. */
  otherAttr(record: Buffer): number {
    if (this.attrs.length === 1) return 0;
    const first = this.attrs[0]!;
    const pos = isPos(first.sampleType);
    if (!first.sampleIdAll || pos < 0 || record.length < 8 + pos * 8) return -1;
    return this.byId.get(record.readBigUInt64LE(record.length - pos * 8)) ?? -1;
  }

  /** The time in a non-sample record's trailer, or undefined when it has none. */
  otherTime(record: Buffer): bigint | undefined {
    const attr = this.attrs[this.otherAttr(record)];
    if (!attr?.sampleIdAll || !(attr.sampleType & sampleBit.time)) return undefined;
    const words = trailerWords(attr.sampleType);
    const at = record.length - words * 8 + (attr.sampleType & sampleBit.tid ? 8 : 0);
    if (at < 8) throw new RecordError('a record too short for its sample id');
    return record.readBigUInt64LE(at);
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

/** Decodes a SAMPLE record of attribute `attrIndex`. */
export function decodeSample(record: Buffer, attrIndex: number, attr: EventAttr): SampleEvent {
  const type = attr.sampleType;
  const end = record.length;
  let at = 8;
  const need = (n: number) => {
    if (at + n > end) throw new RecordError('a sample shorter than its fields');
  };
  const u64 = () => {
    need(8);
    const v = record.readBigUInt64LE(at);
    at += 8;
    return v;
  };
  if (type & sampleBit.identifier) at += 8;
  const ip = type & sampleBit.ip ? u64() : 0n;
  let pid = -1;
  let tid = -1;
  if (type & sampleBit.tid) {
    need(8);
    pid = record.readInt32LE(at);
    tid = record.readInt32LE(at + 4);
    at += 8;
  }
  const time = type & sampleBit.time ? u64() : undefined;
  if (type & sampleBit.addr) at += 8;
  if (type & sampleBit.id) at += 8;
  if (type & sampleBit.streamId) at += 8;
  let cpu: number | undefined;
  if (type & sampleBit.cpu) {
    need(8);
    cpu = record.readUInt32LE(at);
    at += 8;
  }
  const period = type & sampleBit.period ? u64() : 1n;
  if (type & sampleBit.read) at += readBytes(attr.readFormat, record, at);
  let callchain: BigUint64Array | undefined;
  if (type & sampleBit.callchain) {
    const nr = u64();
    if (nr > BigInt(Math.floor((end - at) / 8))) throw new RecordError('a callchain longer than its sample');
    const kept = Math.min(Number(nr), limits.maxCallchain);
    // One copy into a typed array: 8 bytes an entry, where an array of bigints costs several times that.
    callchain = new BigUint64Array(kept);
    new Uint8Array(callchain.buffer).set(record.subarray(at, at + kept * 8));
  }
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
  };
}

/** Bytes of a sample's READ field at `at`. */
function readBytes(format: bigint, record: Buffer, at: number): number {
  const perValue = 1 + (format & readBit.id ? 1 : 0) + (format & readBit.lost ? 1 : 0);
  const times = (format & readBit.totalTimeEnabled ? 1 : 0) + (format & readBit.totalTimeRunning ? 1 : 0);
  if (!(format & readBit.group)) return (perValue + times) * 8;
  if (at + 8 > record.length) throw new RecordError('a sample shorter than its read values');
  const nr = record.readBigUInt64LE(at);
  if (nr > BigInt(record.length)) throw new RecordError('a read group larger than its sample');
  return (1 + times + Number(nr) * perValue) * 8;
}

/** Decodes one of the side-band records profcpu uses, or undefined for other types. */
export function decodeOther(record: Buffer, type: number, time: bigint | undefined): PerfEvent | undefined {
  const recordMisc = record.readUInt16LE(4);
  const need = (n: number) => {
    if (n > record.length) throw new RecordError(`a record of type ${type} shorter than its fields`);
  };
  switch (type) {
    case recordType.mmap:
      need(40);
      return {
        kind: 'mmap',
        offset: 0,
        pid: record.readInt32LE(8),
        tid: record.readInt32LE(12),
        start: record.readBigUInt64LE(16),
        length: record.readBigUInt64LE(24),
        pgoff: record.readBigUInt64LE(32),
        filename: cString(record, 40),
        buildId: undefined,
        prot: undefined,
        cpumode: recordMisc & misc.cpumodeMask,
        time,
      };
    case recordType.mmap2: {
      need(72);
      const withBuildId = (recordMisc & misc.mmapBuildId) !== 0;
      return {
        kind: 'mmap',
        offset: 0,
        pid: record.readInt32LE(8),
        tid: record.readInt32LE(12),
        start: record.readBigUInt64LE(16),
        length: record.readBigUInt64LE(24),
        pgoff: record.readBigUInt64LE(32),
        filename: cString(record, 72),
        buildId: withBuildId ? record.toString('hex', 44, 44 + Math.min(record[40]!, 20)) : undefined,
        prot: record.readUInt32LE(64),
        cpumode: recordMisc & misc.cpumodeMask,
        time,
      };
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
    default:
      return undefined;
  }
}

/** A NUL-terminated string from `at` to the record's end (the sample_id trailer comes after the NUL). */
function cString(record: Buffer, at: number): string {
  const nul = record.indexOf(0, at);
  return record.toString('utf8', at, nul < 0 ? record.length : nul);
}

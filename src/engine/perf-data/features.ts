// The feature sections of a perf.data that profcpu uses, decoded from their bytes (file mode: the sections after the
// data; pipe mode: the body of a HEADER_FEATURE record after its feature id): host, OS release, perf version, arch,
// CPUs, CPU description and id, memory, command line, event names, PMU names, first and last sample times, clock
// resolution and build-ids. Every count and length is checked against the
// section's bytes; a bad section throws (the caller says which file).
import { attrMinBytes, feature, limits, misc } from './format.js';

export interface BuildIdEntry {
  /** Lower-case hex. */
  buildId: string;
  filename: string;
  pid: number;
  /** perf's cpumode of the entry: 1 kernel, 2 user. */
  cpumode: number;
}

export interface Features {
  hostname?: string;
  osRelease?: string;
  perfVersion?: string;
  arch?: string;
  cpuDesc?: string;
  cpuid?: string;
  /** kB, as perf prints it. */
  totalMemKb?: bigint;
  nrCpusAvailable?: number;
  nrCpusOnline?: number;
  cmdline?: string[];
  /** Event names in attribute order, with the ids and the attribute (its bytes, as the file has them) of each. */
  eventDesc?: { name: string; ids: bigint[]; attr: Buffer }[];
  /** The PMUs perf knew, by type number and name (PMU_MAPPINGS), in the file's order. */
  pmuMappings?: { type: number; name: string }[];
  /** The first and last sample times, ns (SAMPLE_TIME). */
  sampleTime?: { first: bigint; last: bigint };
  /** The resolution of the clock perf recorded with (-k), ns (CLOCKID). */
  clockidResNs?: bigint;
  /** The clock perf recorded with and one reading of it with the time of day, ns (CLOCK_DATA, version 1). */
  clockData?: { clockid: number; todNs: bigint; clockidNs: bigint };
  buildIds: BuildIdEntry[];
}

class Cursor {
  at = 0;
  constructor(readonly bytes: Buffer) {}
  need(n: number): void {
    if (n < 0 || this.at + n > this.bytes.length) throw new Error(`section ends before ${n} more bytes`);
  }
  u32(): number {
    this.need(4);
    const v = this.bytes.readUInt32LE(this.at);
    this.at += 4;
    return v;
  }
  u64(): bigint {
    this.need(8);
    const v = this.bytes.readBigUInt64LE(this.at);
    this.at += 8;
    return v;
  }
  /** perf's do_write_string: u32 length (padded, NUL included), then the bytes. */
  string(): string {
    const length = this.u32();
    this.need(length);
    const raw = this.bytes.subarray(this.at, this.at + length);
    this.at += length;
    const nul = raw.indexOf(0);
    return raw.toString('utf8', 0, nul < 0 ? raw.length : nul);
  }
}

function count(n: number, max: number, what: string): number {
  if (n > max) throw new Error(`${n} ${what} (at most ${max})`);
  return n;
}

/** Decodes feature `bit` from `bytes` into `into`; features profcpu does not use are left alone. */
export function decodeFeature(bit: number, bytes: Buffer, into: Features): void {
  const c = new Cursor(bytes);
  switch (bit) {
    case feature.hostname:
      into.hostname = c.string();
      return;
    case feature.osRelease:
      into.osRelease = c.string();
      return;
    case feature.version:
      into.perfVersion = c.string();
      return;
    case feature.arch:
      into.arch = c.string();
      return;
    case feature.cpuDesc:
      into.cpuDesc = c.string();
      return;
    case feature.cpuid:
      into.cpuid = c.string();
      return;
    case feature.totalMem:
      into.totalMemKb = c.u64();
      return;
    case feature.pmuMappings: {
      const n = count(c.u32(), limits.maxStrings, 'PMU mappings');
      into.pmuMappings = Array.from({ length: n }, () => ({ type: c.u32(), name: c.string() }));
      return;
    }
    case feature.sampleTime:
      into.sampleTime = { first: c.u64(), last: c.u64() };
      return;
    case feature.clockid:
      into.clockidResNs = c.u64();
      return;
    case feature.clockData: {
      // perf refuses other versions; they are left undecoded.
      if (c.u32() !== 1) return;
      into.clockData = { clockid: c.u32(), todNs: c.u64(), clockidNs: c.u64() };
      return;
    }
    case feature.nrCpus:
      into.nrCpusAvailable = c.u32();
      into.nrCpusOnline = c.u32();
      return;
    case feature.cmdline: {
      const n = count(c.u32(), limits.maxStrings, 'command-line arguments');
      into.cmdline = Array.from({ length: n }, () => c.string());
      return;
    }
    case feature.eventDesc:
      into.eventDesc = decodeEventDesc(c);
      return;
    case feature.buildId:
      into.buildIds.push(...decodeBuildIds(bytes));
      return;
  }
}

function decodeEventDesc(c: Cursor) {
  const n = count(c.u32(), limits.maxAttrs, 'event descriptions');
  const attrSize = c.u32();
  if (attrSize < attrMinBytes || attrSize > limits.maxAttrBytes) throw new Error(`event attributes of ${attrSize}`);
  const events: { name: string; ids: bigint[]; attr: Buffer }[] = [];
  for (let i = 0; i < n; i++) {
    c.need(attrSize);
    // A copy: the section's bytes are not kept.
    const attr = Buffer.from(c.bytes.subarray(c.at, c.at + attrSize));
    c.at += attrSize;
    const nrIds = c.u32();
    const name = c.string();
    c.need(nrIds * 8);
    const ids: bigint[] = [];
    for (let j = 0; j < nrIds; j++) ids.push(c.u64());
    events.push({ name, ids, attr });
  }
  return events;
}

/**
 * The build-id table: perf_record_header_build_id records (8-byte header, pid, 24 bytes of build-id whose byte 20 is
 * its length when misc has BUILD_ID_SIZE, else 20, then the file name up to the record's end).
 */
export function decodeBuildIds(bytes: Buffer): BuildIdEntry[] {
  const entries: BuildIdEntry[] = [];
  for (let at = 0; at + 8 <= bytes.length;) {
    const size = bytes.readUInt16LE(at + 6);
    if (size < 36 || at + size > bytes.length) throw new Error(`a build-id entry of ${size} bytes`);
    entries.push(decodeBuildIdRecord(bytes.subarray(at, at + size)));
    at += size;
  }
  return entries;
}

/** One perf_record_header_build_id (also the body of a pipe-mode HEADER_BUILD_ID record), size checked ≥ 36. */
export function decodeBuildIdRecord(record: Buffer): BuildIdEntry {
  const recordMisc = record.readUInt16LE(4);
  const length = recordMisc & misc.buildIdSize ? Math.min(record[32]!, 20) : 20;
  const name = record.subarray(36);
  const nul = name.indexOf(0);
  return {
    pid: record.readInt32LE(8),
    buildId: record.toString('hex', 12, 12 + length),
    filename: name.toString('utf8', 0, nul < 0 ? name.length : nul),
    cpumode: recordMisc & misc.cpumodeMask,
  };
}

// The numbers of the perf.data format that profcpu reads: record types, sample fields, feature bits, attribute
// offsets (linux tools/perf/Documentation/perf.data-file-format.txt, include/uapi/linux/perf_event.h,
// tools/perf/util/event.h and header.h), and the decoding of a perf_event_attr into what the reader needs. Also the
// bounds every reader of this folder applies to sizes and counts read from a file someone else may have written.
import { ProfcpuError } from '../../error.js';

export const recordType = Object.freeze({
  mmap: 1,
  lost: 2,
  comm: 3,
  exit: 4,
  fork: 7,
  sample: 9,
  mmap2: 10,
  lostSamples: 13,
  /** A context switch of a recorded thread (perf record --switch-events with -p/-t): in, or out. */
  switch: 14,
  /** A context switch on a CPU (--switch-events with -a): in or out, and the thread on the other side. */
  switchCpuWide: 15,
  // Records perf itself writes (not the kernel).
  headerAttr: 64,
  headerEventType: 65,
  headerTracingData: 66,
  headerBuildId: 67,
  finishedRound: 68,
  auxtraceInfo: 70,
  auxtrace: 71,
  headerFeature: 80,
  compressed: 81,
  /** perf 7's COMPRESSED: its payload's size, then the payload, padded to 8 bytes. */
  compressed2: 83,
});

/** perf_event_sample_format bits. */
export const sampleBit = Object.freeze({
  ip: 1n << 0n,
  tid: 1n << 1n,
  time: 1n << 2n,
  addr: 1n << 3n,
  read: 1n << 4n,
  callchain: 1n << 5n,
  id: 1n << 6n,
  cpu: 1n << 7n,
  period: 1n << 8n,
  streamId: 1n << 9n,
  raw: 1n << 10n,
  branchStack: 1n << 11n,
  regsUser: 1n << 12n,
  stackUser: 1n << 13n,
  identifier: 1n << 16n,
  regsIntr: 1n << 18n,
});

/** perf_branch_sample_type's HW_INDEX bit: each branch stack starts with the hardware's index (a u64). */
export const branchHwIndex = 1n << 17n;

/** PERF_SAMPLE_REGS_ABI_*: what a REGS_USER field says of the registers that follow it (none for a kernel thread). */
export const regsAbi = Object.freeze({ none: 0, abi32: 1, abi64: 2 });

/** perf_branch_sample_type's CALL_STACK bit: the branch stack is the call stack (perf record --call-graph lbr). */
export const branchCallStack = 1n << 11n;

/** perf_event_read_format bits. */
export const readBit = Object.freeze({ totalTimeEnabled: 1n, totalTimeRunning: 2n, id: 4n, group: 8n, lost: 16n });

/** The feature sections profcpu reads (bit numbers of the header's feature bitmap, HEADER_* in header.h). */
export const feature = Object.freeze({
  buildId: 2,
  hostname: 3,
  osRelease: 4,
  version: 5,
  arch: 6,
  nrCpus: 7,
  cpuDesc: 8,
  cpuid: 9,
  totalMem: 10,
  cmdline: 11,
  eventDesc: 12,
  pmuMappings: 16,
  sampleTime: 21,
  clockid: 23,
  dirFormat: 24,
  clockData: 29,
});

/** perf 6.1's feature names, by bit (1 to 31), as its `missing features` line names them. */
export const featureNames61 = [
  'RESERVED',
  'TRACING_DATA',
  'BUILD_ID',
  'HOSTNAME',
  'OSRELEASE',
  'VERSION',
  'ARCH',
  'NRCPUS',
  'CPUDESC',
  'CPUID',
  'TOTAL_MEM',
  'CMDLINE',
  'EVENT_DESC',
  'CPU_TOPOLOGY',
  'NUMA_TOPOLOGY',
  'BRANCH_STACK',
  'PMU_MAPPINGS',
  'GROUP_DESC',
  'AUXTRACE',
  'STAT',
  'CACHE',
  'SAMPLE_TIME',
  'MEM_TOPOLOGY',
  'CLOCKID',
  'DIR_FORMAT',
  'BPF_PROG_INFO',
  'BPF_BTF',
  'COMPRESSED',
  'CPU_PMU_CAPS',
  'CLOCK_DATA',
  'HYBRID_TOPOLOGY',
  'PMU_CAPS',
];

/**
 * Features perf script --header names only, as `# <NAME> info available, use -I to display` (perf's full_only
 * features), by bit: the reader notes that the file has them and reads nothing of them.
 */
export const infoOnlyFeatures: ReadonlyMap<number, string> = new Map([
  [13, 'CPU_TOPOLOGY'],
  [14, 'NUMA_TOPOLOGY'],
  [20, 'CACHE'],
  [22, 'MEM_TOPOLOGY'],
  [30, 'HYBRID_TOPOLOGY'],
]);

/** PERF_RECORD_MISC_* bits of a record header's misc field. */
export const misc = Object.freeze({
  cpumodeMask: 7,
  kernel: 1,
  user: 2,
  hypervisor: 3,
  commExec: 1 << 13,
  /** perf's own use of the bit on the FORK records it synthesizes. */
  forkExec: 1 << 13,
  mmapBuildId: 1 << 14,
  /** On SWITCH records: the thread is switched out (else in). */
  switchOut: 1 << 13,
  /** On a SWITCH out: the thread was preempted, still runnable (else it blocked). */
  switchOutPreempt: 1 << 14,
  buildIdSize: 1 << 15,
});

/** Callchain entries at or above PERF_CONTEXT_MAX (-4095) are context markers, not addresses. */
export const contextMax = 0xfffffffffffff001n;
export const context = Object.freeze({
  hv: 0xffffffffffffffe0n,
  kernel: 0xffffffffffffff80n,
  user: 0xfffffffffffffe00n,
  guest: 0xfffffffffffff800n,
  guestKernel: 0xfffffffffffff780n,
  guestUser: 0xfffffffffffff600n,
});

/** Bounds on what a file may claim; beyond them it is damaged or hostile, not big. */
export const limits = Object.freeze({
  /** Attributes (events) in one recording: perf record -e takes a handful; a thousand is already absurd. */
  maxAttrs: 1024,
  /** Ids per attribute: one per CPU and thread perf opened the event on. */
  maxIdsPerAttr: 1 << 20,
  /** A perf_event_attr: 64 bytes in version 0, 136 in perf 6.x; perf.data allows growth but not kilobytes. */
  maxAttrBytes: 4096,
  /** One feature section (a build-id table of thousands of files fits in a few MiB). */
  maxFeatureBytes: 64 << 20,
  /** Build-ids kept from a pipe's HEADER_BUILD_ID records (one per file sampled). */
  maxBuildIds: 1 << 16,
  /** Strings in a feature section (the command line's arguments, event names). */
  maxStrings: 1 << 16,
  /** Callchain entries kept per sample: perf's own max (kernel.perf_event_max_stack) is 127 by default. */
  maxCallchain: 1024,
  /**
   * Records waiting in the time-ordering queue before half of them are delivered regardless (perf's FLUSH_HALF).
   * perf record writes a round per pass over its buffers (512 KiB per CPU): a few thousand samples per CPU, so the
   * cap changes the order only of files no perf record wrote; it bounds memory at a few hundred MB.
   */
  maxQueued: 1 << 18,
  /**
   * Bytes the queued records hold (their callchains' slabs, 512 KiB each, shared by the samples copied into them)
   * before half of them are delivered regardless: a record waiting past a round keeps its whole slab alive.
   */
  maxQueuedBytes: 1 << 30,
});

/** What the reader needs of one perf_event_attr. */
export interface EventAttr {
  type: number;
  config: bigint;
  sampleType: bigint;
  readFormat: bigint;
  sampleIdAll: boolean;
  /** perf_event_attr.inherit: counted in the threads the task makes too. */
  inherit: boolean;
  /** perf_event_attr.context_switch: the event writes SWITCH records (`perf record --switch-events`). */
  contextSwitch: boolean;
  /** perf_event_attr.freq: samplePeriod is a frequency (samples a second), the kernel sets each period to keep it. */
  freq: boolean;
  /**
   * perf_event_attr.sample_period (or sample_freq: the same field): the period perf gives a sample that does not
   * carry its own (PERF_SAMPLE_PERIOD not recorded: `perf record -c N`).
   */
  samplePeriod: bigint;
  /** perf_event_attr.branch_sample_type (0 in attributes too short to hold it). */
  branchSampleType: bigint;
  /**
   * perf_event_attr.sample_regs_user: the registers a REGS_USER field holds, one u64 each in bit order (perf's
   * arch/x86/include/uapi/asm/perf_regs.h numbers them); 0 in attributes too short to hold it (PERF_ATTR_SIZE_VER3).
   */
  sampleRegsUser: bigint;
  /** perf_event_attr.sample_regs_intr, as sampleRegsUser for the REGS_INTR field (PERF_ATTR_SIZE_VER4). */
  sampleRegsIntr: bigint;
  /** The sample ids the kernel gives this event's records (one per CPU or thread it was opened on). */
  ids: bigint[];
  /** The event's name, from the EVENT_DESC feature when the file has it. */
  name: string | undefined;
}

/** Smallest perf_event_attr (PERF_ATTR_SIZE_VER0): every field the reader uses lies within it. */
export const attrMinBytes = 64;

export function badInput(source: string, why: string, cause?: unknown): ProfcpuError {
  return new ProfcpuError('BAD_INPUT', `${source} is not a perf.data profcpu can read: ${why}`, {
    remedy:
      'The file is damaged, cut short or was not written by perf record. Record again, or post-process it with ' +
      '`--engine perf` to let perf try.',
    ...(cause !== undefined && { cause }),
  });
}

/**
 * Decodes the attr at `bytes[at, at + size)`, size checked by the caller to be at least attrMinBytes; `size` is the
 * attribute's own (its field at offset 4), which says whether it reaches branch_sample_type (PERF_ATTR_SIZE_VER2),
 * sample_regs_user (VER3) and sample_regs_intr (VER4).
 */
export function decodeAttr(bytes: Buffer, at: number, size = attrMinBytes): Omit<EventAttr, 'ids' | 'name'> {
  const flags = bytes.readBigUInt64LE(at + 40);
  return {
    type: bytes.readUInt32LE(at),
    config: bytes.readBigUInt64LE(at + 8),
    sampleType: bytes.readBigUInt64LE(at + 24),
    readFormat: bytes.readBigUInt64LE(at + 32),
    sampleIdAll: ((flags >> 18n) & 1n) === 1n,
    inherit: ((flags >> 1n) & 1n) === 1n,
    contextSwitch: ((flags >> 26n) & 1n) === 1n,
    freq: ((flags >> 10n) & 1n) === 1n,
    samplePeriod: bytes.readBigUInt64LE(at + 16),
    branchSampleType: size >= 80 && at + 80 <= bytes.length ? bytes.readBigUInt64LE(at + 72) : 0n,
    sampleRegsUser: size >= 88 && at + 88 <= bytes.length ? bytes.readBigUInt64LE(at + 80) : 0n,
    sampleRegsIntr: size >= 104 && at + 104 <= bytes.length ? bytes.readBigUInt64LE(at + 96) : 0n,
  };
}

/** perf's `dummy` software event (config 9): it takes side-band records (mappings, switches), never samples. */
export function isDummyEvent(attr: Pick<EventAttr, 'type' | 'config'>): boolean {
  return attr.type === 1 && attr.config === 9n;
}

/** perf's own name for the software and hardware events profcpu records, when EVENT_DESC is absent. */
export function defaultEventName(attr: Pick<EventAttr, 'type' | 'config'>): string {
  const software = ['cpu-clock', 'task-clock', 'page-faults', 'context-switches', 'cpu-migrations'];
  const hardware = ['cycles', 'instructions', 'cache-references', 'cache-misses', 'branches', 'branch-misses'];
  if (attr.type === 1 && attr.config < BigInt(software.length)) return software[Number(attr.config)]!;
  if (attr.type === 0 && attr.config < BigInt(hardware.length)) return hardware[Number(attr.config)]!;
  return `event-${attr.type}:${attr.config}`;
}

// The `# event : ...` line of perf script --header for one event of EVENT_DESC, as perf 6.1 prints it: its name, its
// ids, then each field of its perf_event_attr that is not zero, in the attribute's order, as `, <field> = <value>`.
// Takes the attribute's bytes as the file holds them (fields past its size read as zero); gives undefined for an
// attribute holding what this module does not know how perf prints (branch sampling, sample or read format bits and
// flags newer than these), so that the caller writes the line up to the name only.

/** Sample format bits perf 6.1 names, by bit; the others make the line unknown. */
const sampleTypeNames = new Map<number, string>([
  [0, 'IP'],
  [1, 'TID'],
  [2, 'TIME'],
  [3, 'ADDR'],
  [4, 'READ'],
  [5, 'CALLCHAIN'],
  [6, 'ID'],
  [7, 'CPU'],
  [8, 'PERIOD'],
  [9, 'STREAM_ID'],
  [16, 'IDENTIFIER'],
]);

const readFormatNames = ['TOTAL_TIME_ENABLED', 'TOTAL_TIME_RUNNING', 'ID', 'GROUP', 'LOST'];

/** The attribute's one-bit flags from bit 0 of its flags word (precise_ip, two bits at 15, is apart). */
const flagNames = [
  'disabled',
  'inherit',
  'pinned',
  'exclusive',
  'exclude_user',
  'exclude_kernel',
  'exclude_hv',
  'exclude_idle',
  'mmap',
  'comm',
  'freq',
  'inherit_stat',
  'enable_on_exec',
  'task',
  'watermark',
];
const laterFlagNames = [
  'mmap_data',
  'sample_id_all',
  'exclude_host',
  'exclude_guest',
  'exclude_callchain_kernel',
  'exclude_callchain_user',
  'mmap2',
  'comm_exec',
  'use_clockid',
  'context_switch',
  'write_backward',
  'namespaces',
  'ksymbol',
  'bpf_event',
  'aux_output',
  'cgroup',
  'text_poke',
  'build_id',
  'inherit_thread',
  'remove_on_exec',
  'sigtrap',
];
/** Flags from bit 38 on are newer than perf 6.1. */
const knownFlags = (1n << 38n) - 1n;

/** `# event : name = <name>, , id = { ... }, <fields>`, or undefined when the attribute holds unknown fields. */
export function eventLine(name: string, ids: readonly bigint[], attr: Buffer): string | undefined {
  const u64 = (at: number) => (at + 8 <= attr.length ? attr.readBigUInt64LE(at) : 0n);
  const u32 = (at: number) => (at + 4 <= attr.length ? attr.readUInt32LE(at) : 0);
  const sampleType = u64(24);
  const readFormat = u64(32);
  const flags = u64(40);
  const unknownSampleBits = [...bitsOf(sampleType)].some((bit) => !sampleTypeNames.has(bit));
  const unknownReadBits = readFormat >> BigInt(readFormatNames.length) !== 0n;
  // branch_sample_type (72) and config3 (128) are printed in ways this module does not write.
  if (unknownSampleBits || unknownReadBits || (flags & ~knownFlags) !== 0n || u64(72) !== 0n || u64(128) !== 0n)
    return undefined;

  let line = `# event : name = ${name}, `;
  if (ids.length > 0) line += `, id = {${ids.map((id) => ` ${id}`).join(',')} }`;
  const field = (label: string, value: bigint | number, hex = false) => {
    if (value !== 0 && value !== 0n) line += `, ${label} = ${hex ? `0x${value.toString(16)}` : value}`;
  };
  field('type', u32(0));
  field('size', u32(4));
  field('config', u64(8), true);
  field('{ sample_period, sample_freq }', u64(16));
  if (sampleType !== 0n)
    line += `, sample_type = ${[...bitsOf(sampleType)].map((bit) => sampleTypeNames.get(bit)).join('|')}`;
  if (readFormat !== 0n)
    line += `, read_format = ${[...bitsOf(readFormat)].map((bit) => readFormatNames[bit]).join('|')}`;
  flagNames.forEach((flag, bit) => field(flag, (flags >> BigInt(bit)) & 1n));
  field('precise_ip', (flags >> 15n) & 3n);
  laterFlagNames.forEach((flag, i) => field(flag, (flags >> BigInt(17 + i)) & 1n));
  field('{ wakeup_events, wakeup_watermark }', u32(48));
  field('bp_type', u32(52));
  field('{ bp_addr, config1 }', u64(56), true);
  field('{ bp_len, config2 }', u64(64), true);
  field('sample_regs_user', u64(80), true);
  field('sample_stack_user', u32(88));
  field('clockid', 96 <= attr.length ? attr.readInt32LE(92) : 0);
  field('sample_regs_intr', u64(96), true);
  field('aux_watermark', u32(104));
  field('sample_max_stack', 110 <= attr.length ? attr.readUInt16LE(108) : 0);
  field('aux_sample_size', u32(112));
  field('sig_data', u64(120));
  return line;
}

/** The set bits of a u64, lowest first. */
function* bitsOf(value: bigint): Generator<number> {
  for (let bit = 0; bit < 64; bit++) if ((value >> BigInt(bit)) & 1n) yield bit;
}

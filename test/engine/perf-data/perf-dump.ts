// What perf itself decodes from a perf.data, for comparison with src/engine/perf-data/: `perf script -D` prints every event
// it delivers, in delivery order, as `[cpu ]time offset [size]: PERF_RECORD_<TYPE>...`, a sample followed by its raw
// callchain. Both sides are written here as the same one-line text per event, so a test compares two lists.
import { execa } from 'execa';
import type { PerfEvent } from '../../../src/engine/perf-data/reader.js';

const eventLine =
  /^(?:(\d+) )?(\d+) (0x[0-9a-f]+) \[0x[0-9a-f]+\]: PERF_RECORD_(SAMPLE|MMAP2|MMAP|COMM|FORK|EXIT|SWITCH_CPU_WIDE|SWITCH)(.*)$/;
const chainEntry = /^\.{5} +\d+: ([0-9a-f]+)$/;

/** perf's events of `perfData`, one line each (see `describe`). */
export async function perfDumpEvents(perfData: string): Promise<string[]> {
  const { stdout } = await execa('perf', ['script', '-D', '-i', perfData], { maxBuffer: 1 << 30 });
  const lines: string[] = [];
  let chain: string[] | undefined;
  for (const line of stdout.split('\n')) {
    const entry = chain && chainEntry.exec(line);
    if (entry) {
      chain!.push(BigInt(`0x${entry[1]}`).toString(16));
      continue;
    }
    // `... FP chain: nr:N` before the entries, `... thread: comm:tid` after them.
    if (chain && line.startsWith('... ')) continue;
    if (chain) {
      lines[lines.length - 1] += ` chain ${chain.join(',')}`;
      chain = undefined;
    }
    const m = eventLine.exec(line);
    if (!m) continue;
    const [, cpu, time, offset, type, rest] = m as unknown as string[];
    const at = `${time} ${offset}`;
    if (type === 'SAMPLE') {
      const s = /^\(IP, 0x\d\): (-?\d+)\/(-?\d+): 0x([0-9a-f]+) period: (\d+)/.exec(rest!)!;
      lines.push(`${at} SAMPLE cpu ${cpu ?? '-'} ${s[1]}/${s[2]} ip ${s[3]} period ${s[4]}`);
      chain = [];
    } else if (type === 'MMAP' || type === 'MMAP2') {
      const s = /^ (-?\d+)\/(-?\d+): \[0x([0-9a-f]+)\(0x([0-9a-f]+)\) @ (?:0x)?([0-9a-f]+)[^\]]*\]: \S+ (.*)$/.exec(
        rest!,
      )!;
      lines.push(`${at} MMAP ${s[1]}/${s[2]} ${s[3]} ${s[4]} ${s[5]} ${s[6]}`);
    } else if (type === 'COMM') {
      const s = /^(?: exec)?: (.*):(-?\d+)\/(-?\d+)$/.exec(rest!)!;
      lines.push(`${at} COMM ${s[2]}/${s[3]} ${s[1]}`);
    } else if (type === 'SWITCH' || type === 'SWITCH_CPU_WIDE') {
      // ` OUT preempt`, ` OUT        `, ` IN         `; CPU-wide ones name the other thread after it.
      const s = /^ (IN|OUT preempt|OUT)(?: +(?:next|prev) pid\/tid: +(-?\d+)\/(-?\d+))?/.exec(rest!)!;
      lines.push(`${at} SWITCH ${s[1]}${s[2] === undefined ? '' : ` ${s[2]}/${s[3]}`}`);
    } else {
      lines.push(`${at} ${type} ${rest}`);
    }
  }
  if (chain) lines[lines.length - 1] += ` chain ${chain.join(',')}`;
  return lines;
}

/** One of our events as perfDumpEvents writes perf's. */
export function describe(event: PerfEvent): string {
  const at = `${event.time ?? 0n} 0x${event.offset.toString(16)}`;
  const hex = (v: bigint) => v.toString(16);
  switch (event.kind) {
    case 'sample': {
      const chain = event.callchain ? ` chain ${Array.from(event.callchain, hex).join(',')}` : '';
      return `${at} SAMPLE cpu ${event.cpu ?? '-'} ${event.pid}/${event.tid} ip ${hex(event.ip)} period ${event.period}${chain}`;
    }
    case 'mmap':
      return `${at} MMAP ${event.pid}/${event.tid} ${hex(event.start)} ${hex(event.length)} ${hex(event.pgoff)} ${event.filename}`;
    case 'comm':
      return `${at} COMM ${event.pid}/${event.tid} ${event.comm}`;
    case 'fork':
    case 'exit':
      return `${at} ${event.kind.toUpperCase()} (${event.pid}:${event.tid}):(${event.ppid}:${event.ptid})`;
    case 'lost':
      return `${at} LOST ${event.lost}`;
    case 'switch': {
      const other = event.other ? ` ${event.other.pid}/${event.other.tid}` : '';
      return `${at} SWITCH ${event.out ? (event.preempted ? 'OUT preempt' : 'OUT') : 'IN'}${other}`;
    }
  }
}

// The `#` header of perf script --header, written from a perf.data's header without perf (reader.ts): takes the
// attributes, the features the reader decodes and, in file mode, the file's facts; gives the lines perf prints, each
// as perf prints it and in its order (the file's facts, then the feature sections by bit). Lines of features the
// reader does not decode are left out. With `attrLines` (a recording by perf 6.1, the version checked line for line),
// an event's line lists its attribute (event-line.ts) and the missing features close the list; otherwise an event's
// line stops after its name and there is no missing-features line.
import { eventLine } from './event-line.js';
import { feature, featureNames61, infoOnlyFeatures } from './perf-data/format.js';
import type { PerfDataHeader } from './perf-data/reader.js';

/** The header's text, every line ending in a newline; `names` are the events' names in attribute order. */
export function scriptHeader(header: PerfDataHeader, names: readonly string[], attrLines: boolean): string {
  const f = header.features;
  const lines = ['# ========'];
  const fact = (name: string, value: string | number | bigint | undefined) => {
    if (value !== undefined) lines.push(`# ${name} : ${value}`);
  };
  const file = header.file;
  if (file) {
    lines.push(
      `# captured on    : ${ctime(file.mtimeMs)}`,
      '# header version : 1',
      `# data offset    : ${file.dataOffset}`,
      `# data size      : ${file.dataSize}`,
      `# feat offset    : ${file.dataOffset + file.dataSize}`,
    );
  }
  fact('hostname', f.hostname);
  fact('os release', f.osRelease);
  fact('perf version', f.perfVersion);
  fact('arch', f.arch);
  fact('nrcpus online', f.nrCpusOnline);
  fact('nrcpus avail', f.nrCpusAvailable);
  fact('cpudesc', f.cpuDesc);
  fact('cpuid', f.cpuid);
  if (f.totalMemKb !== undefined) lines.push(`# total memory : ${f.totalMemKb} kB`);
  if (f.cmdline) lines.push(`# cmdline : ${f.cmdline.join(' ')} `);
  if (f.eventDesc && attrLines)
    for (const event of f.eventDesc)
      lines.push(eventLine(event.name, event.ids, event.attr) ?? `# event : name = ${event.name}, `);
  else for (const name of names) lines.push(`# event : name = ${name}, `);
  // The later features, by bit; those perf names only are known in file mode (its bitmap).
  const bits = new Set(file?.featureBits);
  for (let bit = feature.eventDesc + 1; bit < 64; bit++) {
    const infoOnly = infoOnlyFeatures.get(bit);
    if (infoOnly && bits.has(bit)) lines.push(`# ${infoOnly} info available, use -I to display`);
    else if (bit === feature.pmuMappings && f.pmuMappings) lines.push(pmuMappingsLine(f.pmuMappings));
    else if (bit === feature.sampleTime && f.sampleTime) lines.push(...sampleTimeLines(f.sampleTime));
    else if (bit === feature.clockid && f.clockidResNs !== undefined)
      lines.push(`# clockid frequency: ${BigInt.asUintN(64, f.clockidResNs * 1000n)} MHz`);
    else if (bit === feature.clockData && f.clockData) lines.push(...clockDataLines(f.clockData));
  }
  // The features perf 6.1 knows that the file lacks (file mode only, as perf).
  if (file && attrLines) {
    const missing = featureNames61.filter((_, bit) => bit > 0 && !bits.has(bit));
    lines.push(`# missing features: ${missing.map((name) => `${name} `).join('')}`);
  }
  lines.push('# ========', '#', '');
  return lines.join('\n');
}

/** ctime(3) of a file's mtime, local time, without its newline: `Wed Nov 25 03:18:59 2026`. */
function ctime(mtimeMs: number): string {
  const d = new Date(Math.floor(mtimeMs / 1000) * 1000);
  const day = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'][d.getDay()];
  const month = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'][d.getMonth()];
  const two = (n: number) => String(n).padStart(2, '0');
  const clock = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  return `${day} ${month} ${String(d.getDate()).padStart(2)} ${clock} ${d.getFullYear()}`;
}

function pmuMappingsLine(mappings: readonly { type: number; name: string }[]): string {
  if (mappings.length === 0) return '# pmu mappings: not available';
  return `# pmu mappings: ${mappings.map((m) => `${m.name} = ${m.type}`).join(', ')}`;
}

/** Names of the clocks perf records with (-k), by clockid, as its clockid_name gives them. */
const clockNames = new Map([
  [1, 'monotonic'],
  [4, 'monotonic_raw'],
  [0, 'realtime'],
  [7, 'boottime'],
  [11, 'tai'],
]);

/** perf's CLOCK_DATA lines: the clock, and its reading beside the time of day (local time). None for other clocks. */
function clockDataLines(data: { clockid: number; todNs: bigint; clockidNs: bigint }): string[] {
  const name = clockNames.get(data.clockid);
  // perf prints the seconds as signed longs: times past 2^63 ns are left to it.
  if (!name || data.todNs >= 1n << 63n || data.clockidNs >= 1n << 63n) return [];
  const todSeconds = data.todNs / 1_000_000_000n;
  const todMicros = String((data.todNs % 1_000_000_000n) / 1000n).padStart(6, '0');
  const d = new Date(Number(todSeconds) * 1000);
  const two = (n: number) => String(n).padStart(2, '0');
  const date = `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}`;
  const clock = `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  const clockidTime = `${data.clockidNs / 1_000_000_000n}.${String(data.clockidNs % 1_000_000_000n).padStart(9, '0')}`;
  return [
    `# clockid: ${name} (${data.clockid})`,
    `# reference time: ${date} ${clock}.${todMicros} = ${todSeconds}.${todMicros} (TOD) = ${clockidTime} (${name})`,
  ];
}

/** perf's SAMPLE_TIME lines: the times as seconds.micros, the duration in ms as printf's `%10.3f`. */
function sampleTimeLines({ first, last }: { first: bigint; last: bigint }): string[] {
  const micros = (time: bigint) =>
    `${time / 1_000_000_000n}.${String((time % 1_000_000_000n) / 1000n).padStart(6, '0')}`;
  // perf subtracts u64s (a last time before the first wraps) and divides as a double.
  const ms = Number(BigInt.asUintN(64, last - first)) / 1e6;
  return [
    `# time of first sample : ${micros(first)}`,
    `# time of last sample : ${micros(last)}`,
    `# sample duration : ${fixed3(ms).padStart(10)} ms`,
  ];
}

/**
 * printf's `%.3f` of a non-negative double: toFixed rounds an exact tie up, glibc to even (a tie needs the double
 * to be a multiple of 1/2000 exactly, as 0.0625).
 */
export function fixed3(value: number): string {
  // toFixed rounds the double's exact value as printf does, but of two as near takes the larger, printf the even one:
  // a tie is a double whose exact decimal expansion (toFixed(100) holds it whole when it can be one) ends in 5 there.
  const tie = /^(\d+\.\d{3})50*$/.exec(value.toFixed(100));
  if (tie && Number(tie[1]!.at(-1)) % 2 === 0) return tie[1]!;
  return value.toFixed(3);
}

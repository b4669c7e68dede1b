// The table of the .NET runtime's stubs that collect read from the target's memory (src/dotnet/runtime-stubs/runtime-stubs.ts),
// as a file of the output folder (`target/runtime-stubs.json`), and back: written by the runtime-stubs step, read by
// postprocess to name frames in stubs once the target is gone. A folder may come from anybody: the file is read up to
// a cap, each range checked (hex addresses, start before end, a short plain kind name), their count capped, and
// overlaps resolved, so a forged table can name frames wrongly but cannot make postprocess slow or large.
import { layout } from '../../output/layout.js';
import { outputModes, type OutputFolder } from '../../files/output-folder.js';
import { mergeRanges, type StubRange } from './runtime-stubs.js';

export const runtimeStubStoreLimits = Object.freeze({
  /** Largest table file read. */
  fileBytes: 32 << 20,
  /** Ranges kept at most. */
  maxRanges: 200_000,
});

/** What the file says besides the ranges: how they were read, for the manifest. */
export interface RuntimeStubTable {
  ranges: StubRange[];
  /** The runtime's version as its library's path says, if it does. */
  runtimeVersion: string | undefined;
  /** How the ranges were found (`contract descriptor`). */
  source: string | undefined;
}

export async function writeRuntimeStubTable(
  folder: OutputFolder,
  table: RuntimeStubTable,
  read: Record<string, unknown>,
): Promise<void> {
  const text = JSON.stringify({
    format: 1,
    runtime: { version: table.runtimeVersion, source: table.source },
    read,
    ranges: table.ranges.map((r) => [`0x${r.start.toString(16)}`, `0x${r.end.toString(16)}`, r.kind]),
  });
  await folder.writeFile(layout.runtimeStubs, `${text}\n`, outputModes.privateFile);
}

/** The folder's table, its sane ranges only; undefined when there is none or it cannot be read at all. */
export async function readRuntimeStubTable(
  folder: OutputFolder,
  warn: (message: string) => void,
): Promise<RuntimeStubTable | undefined> {
  const read = await folder
    .read(layout.runtimeStubs, { maxBytes: runtimeStubStoreLimits.fileBytes, timeoutMs: 10_000 })
    .catch(() => undefined);
  if (!read) return undefined;
  if (read.truncated) {
    warn(`${layout.runtimeStubs} is larger than ${runtimeStubStoreLimits.fileBytes} bytes: not used`);
    return undefined;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.bytes.toString('utf8'));
  } catch {
    warn(`${layout.runtimeStubs} is not JSON: not used`);
    return undefined;
  }
  return parseRuntimeStubTable(parsed, warn);
}

/** The sane part of a parsed table (separate for tests). */
export function parseRuntimeStubTable(parsed: unknown, warn: (message: string) => void): RuntimeStubTable | undefined {
  if (typeof parsed !== 'object' || parsed === null || !Array.isArray((parsed as { ranges?: unknown }).ranges)) {
    warn(`${layout.runtimeStubs} has no ranges: not used`);
    return undefined;
  }
  const { ranges: list, runtime } = parsed as { ranges: unknown[]; runtime?: { version?: unknown; source?: unknown } };
  const ranges: StubRange[] = [];
  let bad = 0;
  for (const entry of list) {
    if (ranges.length >= runtimeStubStoreLimits.maxRanges) {
      warn(`${layout.runtimeStubs} lists more than ${runtimeStubStoreLimits.maxRanges} ranges: the rest are ignored`);
      break;
    }
    const range = parseRange(entry);
    if (range) ranges.push(range);
    else bad++;
  }
  if (bad > 0) warn(`${layout.runtimeStubs}: ${bad} ranges were not usable and were skipped`);
  const text = (value: unknown) => (typeof value === 'string' && /^[\w .+-]{1,40}$/.test(value) ? value : undefined);
  return { ranges: mergeRanges(ranges), runtimeVersion: text(runtime?.version), source: text(runtime?.source) };
}

const hexAddress = /^0x[0-9a-f]{1,16}$/;
const kindName = /^[a-z0-9 ]{1,32}$/;

function parseRange(entry: unknown): StubRange | undefined {
  if (!Array.isArray(entry) || entry.length !== 3) return undefined;
  const [start, end, kind] = entry as unknown[];
  if (typeof start !== 'string' || typeof end !== 'string' || typeof kind !== 'string') return undefined;
  if (!hexAddress.test(start) || !hexAddress.test(end) || !kindName.test(kind)) return undefined;
  const s = BigInt(start);
  const e = BigInt(end);
  return s < e ? { start: s, end: e, kind } : undefined;
}

/** Finds the stub range holding an address: binary search over sorted, disjoint ranges. */
export class StubRangeIndex {
  constructor(private readonly ranges: readonly StubRange[]) {}

  get size(): number {
    return this.ranges.length;
  }

  find(address: bigint): StubRange | undefined {
    let lo = 0;
    let hi = this.ranges.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = this.ranges[mid]!;
      if (address < r.start) hi = mid - 1;
      else if (address >= r.end) lo = mid + 1;
      else return r;
    }
    return undefined;
  }
}

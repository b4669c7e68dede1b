// /proc/PID/maps text in, a list of mappings out (address range, permissions, file offset, inode, path), plus a
// lookup from an absolute address to the mapping holding it. Pure: the caller reads the file (or a snapshot of it,
// `target/maps` in an output folder). Tolerant: lines that are not mappings are counted, never thrown on.

export interface ProcMapping {
  /** First address of the mapping. */
  start: bigint;
  /** One past the last address. */
  end: bigint;
  /** `r-xp` and the like. */
  perms: string;
  /** Offset in the mapped file of `start`. */
  offset: bigint;
  /** `major:minor` of the file's device, as printed (hex). */
  dev: string;
  inode: number;
  /**
   * The path as printed, which may contain spaces (`memfd:doublemapper (deleted)`); '' for an anonymous mapping;
   * `[heap]`, `[stack]`, `[vdso]`... for the kernel's pseudo-mappings.
   */
  path: string;
}

export interface ParseProcMapsResult {
  /** Mappings in file order (the kernel prints them sorted by address). */
  mappings: ProcMapping[];
  /** Non-blank lines that were not mappings (a truncated copy ends with one). */
  skipped: number;
}

// start-end perms offset dev inode [path]; the path keeps everything after the run of spaces that follows the inode.
const linePattern = /^([0-9a-fA-F]+)-([0-9a-fA-F]+)\s+(\S{4})\s+([0-9a-fA-F]+)\s+(\S+)\s+(\d+)(?:\s+(.*))?$/;

/** Parses the text of /proc/PID/maps. */
export function parseProcMaps(text: string): ParseProcMapsResult {
  const result: ParseProcMapsResult = { mappings: [], skipped: 0 };
  for (const raw of text.split('\n')) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') continue;
    const mapping = parseProcMapsLine(line);
    if (mapping) result.mappings.push(mapping);
    else result.skipped++;
  }
  return result;
}

/** Parses one line of /proc/PID/maps, or returns undefined when it is not one. */
export function parseProcMapsLine(line: string): ProcMapping | undefined {
  const m = linePattern.exec(line);
  if (!m) return undefined;
  const start = BigInt(`0x${m[1]!}`);
  const end = BigInt(`0x${m[2]!}`);
  if (end <= start) return undefined;
  return {
    start,
    end,
    perms: m[3]!,
    offset: BigInt(`0x${m[4]!}`),
    dev: m[5]!,
    inode: Number(m[6]!),
    path: (m[7] ?? '').trimEnd(),
  };
}

/** True for a mapping that holds executable code. */
export function isExecutable(mapping: ProcMapping): boolean {
  return mapping.perms[2] === 'x';
}

/** True for a mapping backed by no file at all (JIT code heaps when W^X is off, stubs). */
export function isAnonymous(mapping: ProcMapping): boolean {
  return mapping.path === '' || mapping.path.startsWith('//anon') || mapping.path.startsWith('[anon');
}

/** Address-to-mapping lookup over a maps snapshot. Mappings do not overlap in /proc/PID/maps. */
export class ProcMapsIndex {
  private readonly sorted: readonly ProcMapping[];

  constructor(mappings: readonly ProcMapping[]) {
    this.sorted = [...mappings].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
  }

  get mappings(): readonly ProcMapping[] {
    return this.sorted;
  }

  /** The mapping whose [start, end) holds `address`, if any. */
  find(address: bigint): ProcMapping | undefined {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.sorted[mid]!.start <= address) lo = mid + 1;
      else hi = mid;
    }
    const candidate = this.sorted[lo - 1];
    return candidate && address < candidate.end ? candidate : undefined;
  }

  /** Mappings of the file at `path` (exact match), in address order. */
  byPath(path: string): ProcMapping[] {
    return this.sorted.filter((m) => m.path === path);
  }
}

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

/**
 * A target's executable mappings of files, each once, by path and by file name: where the frames perf printed in a
 * file are placed (placesInFile).
 */
export class FileCodeMappings {
  private readonly byPath = new Map<string, ProcMapping[]>();
  private readonly byName = new Map<string, ProcMapping[]>();

  /** `pathOf` gives the path a mapping is known by, or undefined to leave it out. Default: its path, when it has one. */
  constructor(
    mappings: readonly ProcMapping[],
    pathOf: (mapping: ProcMapping) => string | undefined = (m) => (m.path === '' ? undefined : m.path),
  ) {
    const seen = new Set<string>();
    for (const m of mappings) {
      const path = isExecutable(m) ? pathOf(m) : undefined;
      if (path === undefined) continue;
      const key = `${m.start}-${m.end}-${m.offset}-${path}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const mapping = path === m.path ? m : { ...m, path };
      for (const [map, name] of [
        [this.byPath, path],
        [this.byName, fileName(path)],
      ] as const) {
        const list = map.get(name);
        if (list) list.push(mapping);
        else map.set(name, [mapping]);
      }
    }
  }

  /** The mappings of the file at `path`, in the snapshot's order: none when it maps no such file. */
  ofPath(path: string): readonly ProcMapping[] {
    return this.byPath.get(path) ?? [];
  }

  /**
   * The mappings of the file perf printed as `path`: by that path, else by its file name (a path seen from another
   * mount namespace may differ in its directories, not in its file name).
   */
  of(path: string): readonly ProcMapping[] {
    return this.byPath.get(path) ?? this.byName.get(fileName(path)) ?? [];
  }
}

/** An address in the target, in the mapping that holds it. */
export interface PlaceInFile {
  mapping: ProcMapping;
  address: bigint;
}

/**
 * Where an address perf printed in a file's mapping lies in the target, among the file's executable mappings
 * (`candidates`): perf 6.1 prints an offset into the file, newer perf (6.12 seen) the absolute address. Offsets lie far
 * below the addresses such mappings get, so an address inside one of the mappings is taken as absolute (one place);
 * else each mapping whose part of the file holds it as an offset gives a place, in order (the same file mapped twice).
 */
export function placesInFile(ip: bigint, candidates: readonly ProcMapping[]): PlaceInFile[] {
  for (const mapping of candidates) if (ip >= mapping.start && ip < mapping.end) return [{ mapping, address: ip }];
  const places: PlaceInFile[] = [];
  for (const mapping of candidates)
    if (ip >= mapping.offset && ip < mapping.offset + (mapping.end - mapping.start))
      places.push({ mapping, address: ip - mapping.offset + mapping.start });
  return places;
}

function fileName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

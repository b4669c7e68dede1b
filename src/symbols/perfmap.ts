// perf-PID.map text in (the copy collect took of a .NET process's /tmp/perf-<nspid>.map), code ranges with names out.
// Each line is `<hex start> <hex size> <name>`. The runtime prints the start with `%p`, so a `0x` prefix may or may
// not be there; names contain spaces and brackets; the same range can appear twice (a method re-JIT-ed at the same
// address, a replay after EnablePerfMap) and the runtime may still have been writing the last line when the copy was
// taken. Pure: the caller reads the file.

/** A named range of code: [start, start + size). */
export interface CodeSymbol {
  start: bigint;
  size: bigint;
  name: string;
}

export interface ParsePerfMapResult {
  /** Entries in file order: when ranges overlap, the later one is the newer code. */
  symbols: CodeSymbol[];
  /** Non-blank lines that were not `start size name`, or had a size of 0. */
  skipped: number;
  /** True when the text did not end with a newline: its last line was dropped, as it may have been cut short. */
  truncated: boolean;
}

const linePattern = /^(?:0[xX])?([0-9a-fA-F]{1,16}) +(?:0[xX])?([0-9a-fA-F]{1,16}) +(\S.*)$/;

/** Parses the whole text of a perf map. */
export function parsePerfMap(text: string): ParsePerfMapResult {
  const result: ParsePerfMapResult = { symbols: [], skipped: 0, truncated: false };
  const lines = text.split('\n');
  // A last line without its newline may be cut anywhere, the size field included: a wrong size would name the
  // wrong frames, so it is dropped.
  const last = lines.pop()!;
  if (last.trim() !== '') result.truncated = true;
  for (const raw of lines) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '') continue;
    const symbol = parsePerfMapLine(line);
    if (symbol) result.symbols.push(symbol);
    else result.skipped++;
  }
  return result;
}

/** Parses one complete perf-map line, or returns undefined when it is not one. */
export function parsePerfMapLine(line: string): CodeSymbol | undefined {
  const m = linePattern.exec(line);
  if (!m) return undefined;
  const size = BigInt(`0x${m[2]!}`);
  if (size === 0n) return undefined;
  return { start: BigInt(`0x${m[1]!}`), size, name: m[3]!.trimEnd() };
}

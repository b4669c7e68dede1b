// Calls through the PLT of a file built with indirect-branch tracking (`.plt.sec`), in perf script's text of a
// recording by perf 6.1 or 6.2, renamed as perf 6.3 and later name them (`tiny@plt`): perf 6.1 names them after the
// symbol before the PLT (`_init+0x50`) or `[unknown]`, as its symbol tree's shape decides (elf-functions.ts's
// pltSecRange), which no flame graph should show. The built-in engine names them so from its tables
// (frame-symbols.ts); this does the same to perf's text for --engine perf, before it is teed to the FlameScope file
// and the fold, so both engines fold alike, and both say so. Takes chunks of text, gives them back with each
// `\t<offset> <sym> (<file>)` frame line whose offset lies in a renamed file's PLT rewritten; a chunk naming none of
// those files passes untouched. One-line samples (no callchain) print an address, not an offset, which the text does
// not let place in a file: they are left as perf named them (the built-in engine names them right).
import type { IbtPltTable } from './frame-symbols.js';

const frameLine = /^(\t\s*)([0-9a-f]+) (.*) \((.*)\)$/;

export class PltRenamer {
  private carry = '';
  /** The files whose frames were renamed. */
  readonly renamed = new Set<string>();
  private readonly needles: [string, string][];

  constructor(private readonly tables: ReadonlyMap<string, IbtPltTable>) {
    this.needles = [...tables.keys()].map((path) => [path, ` (${Buffer.from(path, 'utf8').toString('latin1')})`]);
  }

  transform(chunk: Buffer): Buffer {
    const text = this.carry + chunk.toString('latin1');
    const end = text.lastIndexOf('\n') + 1;
    this.carry = text.slice(end);
    const whole = text.slice(0, end);
    if (!this.needles.some(([, needle]) => whole.includes(needle))) return Buffer.from(whole, 'latin1');
    const lines = whole.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const m = frameLine.exec(lines[i]!);
      if (!m) continue;
      const path = Buffer.from(m[4]!, 'latin1').toString('utf8');
      const table = this.tables.get(path);
      if (!table) continue;
      const offset = BigInt(`0x${m[2]!}`);
      if (offset < table.ibtPlt.start || offset >= table.ibtPlt.end) continue;
      const hit = table.lookup(offset);
      const name = hit ? `${hit.name}+0x${hit.offset.toString(16)}` : '[unknown]';
      lines[i] = `${m[1]}${m[2]} ${Buffer.from(name, 'utf8').toString('latin1')} (${m[4]})`;
      this.renamed.add(path);
    }
    return Buffer.from(lines.join('\n'), 'latin1');
  }

  /** What is left at the end (a last line without its newline), renamed as a whole line would be. */
  end(): Buffer {
    const rest = this.carry;
    this.carry = '';
    if (rest === '') return Buffer.alloc(0);
    const done = this.transform(Buffer.from(`${rest}\n`, 'latin1'));
    return done.subarray(0, done.length - 1);
  }
}

/** The warning both engines give when they renamed such frames. */
export function pltRenameWarning(files: Iterable<string>): string {
  const list = [...files].sort();
  const which = `${list.slice(0, 3).join(', ')}${list.length > 3 ? ` and ${list.length - 3} more` : ''}`;
  return (
    `perf 6.1 names calls through the PLT of files built with indirect-branch tracking (.plt.sec) after the ` +
    `symbol before it, or not at all: they are named <target>@plt instead, as perf 6.3 and later name them (${which})`
  );
}

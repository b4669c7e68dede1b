// The names profcpu resolved, written into the FlameScope copy of perf script's text. perf names JIT and ReadyToRun
// frames `[unknown]`; the fold looks them up in the perf map and jitdump snapshots (src/dotnet/naming/resolver.ts), and so does
// this: it takes chunks of perf script text and gives them back with each `<ip> [unknown] (<dso>)` frame line that
// the resolver names rewritten to `<ip> <name> (<dso>)`, in the readable form the flame graph uses. Only such lines
// are touched, so the text stays in perf script's format for FlameScope and every other reader.
import { oneLine, type FrameResolver } from './frame-name.js';
import { formatManagedName } from './managed-name.js';

/** Frame line: leading blanks, a hex address, `[unknown]`, then ` (dso)` to the end of the line. */
const unknownFrame = /^(\s+)([0-9a-fA-F]+) \[unknown\] \((.*)\)$/;
/** Sample header: `comm pid/tid ...` gives the pid (`comm tid ...` gives none, as in the fold). */
const headerPid = /^\S.*?\s(\d+)\/\d+\s/;

export class ScriptNamer {
  private carry = '';
  private pid: number | undefined;
  private readonly names = new Map<string, string | undefined>();
  /** Lines rewritten so far. */
  named = 0;

  constructor(private readonly resolver: FrameResolver) {}

  /** The chunk with resolved names; a line cut by the chunk's end is held back until the next one completes it. */
  transform(chunk: Buffer): Buffer {
    const text = this.carry + chunk.toString('latin1');
    const end = text.lastIndexOf('\n') + 1;
    this.carry = text.slice(end);
    if (end === 0) return Buffer.alloc(0);
    const whole = text.slice(0, end);
    // Most chunks of a well-named profile have no `[unknown]` frame at all: they pass as they are, except that the
    // last sample header seen is remembered for the next chunk's frames.
    if (!whole.includes(' [unknown] (')) {
      this.trackPid(whole);
      return Buffer.from(whole, 'latin1');
    }
    const lines = whole.split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i]!;
      if (line === '' || line.startsWith('#')) continue;
      if (!/^\s/.test(line)) {
        this.pid = pidOf(line);
        continue;
      }
      const match = unknownFrame.exec(line);
      if (!match) continue;
      const name = this.nameOf(match[2]!, match[3]!);
      if (name === undefined) continue;
      lines[i] = `${match[1]}${match[2]} ${name} (${match[3]})`;
      this.named++;
    }
    return Buffer.from(lines.join('\n'), 'latin1');
  }

  /** What is left at the end (a last line without its newline). */
  end(): Buffer {
    const rest = this.carry;
    this.carry = '';
    return Buffer.from(rest, 'latin1');
  }

  /** The pid of the sample the text ends in: its header is the last line before the end that starts a sample. */
  private trackPid(text: string): void {
    for (let end = text.length - 1; end > 0;) {
      const start = text.lastIndexOf('\n', end - 1) + 1;
      if (start === end) return; // a blank line: that sample ended, the next header sets the pid
      const first = text.charCodeAt(start);
      if (first !== 0x20 && first !== 0x09 && first !== 0x23) {
        this.pid = pidOf(text.slice(start, end));
        return;
      }
      end = start - 1;
    }
  }

  private nameOf(ip: string, dsoLatin1: string): string | undefined {
    const key = `${this.pid ?? ''}:${ip}:${dsoLatin1}`;
    if (this.names.has(key)) return this.names.get(key);
    const dso = Buffer.from(dsoLatin1, 'latin1').toString('utf8');
    const resolved = this.resolver.resolve({ pid: this.pid, ip: BigInt(`0x${ip}`), dso });
    // One line per frame: a control character in a name the target wrote would break the format.
    const name = resolved
      ? Buffer.from(
          oneLine(formatManagedName(resolved.name, { keepModule: false, keepArguments: false, keepTier: false })),
          'utf8',
        ).toString('latin1')
      : undefined;
    if (this.names.size < 1_000_000) this.names.set(key, name);
    return name;
  }
}

function pidOf(header: string): number | undefined {
  const match = headerPid.exec(header);
  return match ? Number(match[1]) : undefined;
}

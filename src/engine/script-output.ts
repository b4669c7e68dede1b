// The built-in engine's two outputs from one pass over the samples: takes the samples ScriptTextWriter makes (a header
// line and frame lines, src/engine/script-text.ts), gives flamescope/perf_script.out the bytes the tee writes for
// that text (tee.ts: lines past 16 KiB cut, the names the resolver finds written over `[unknown]`) and folds the same
// samples into a StackFolder, without parsing the text back. Each distinct frame line is prepared once (its bytes in
// the file, the fold's parse of it through StackFolder.frameText), then copied and looked up for every sample holding
// it; a frame line past the cut is cut then, once. A sample whose text holds anything the per-line way could read
// otherwise (a line break inside a name, a header line the fold or the namer might not read as a header) goes the
// tee's way instead, as text through the cutter, the namer and StackFolder.write: either way gives the same bytes and
// the same folds. Only the byte count differs for a cut line: the built-in engine never makes what the cut drops.
import { once } from 'node:events';
import type { WriteStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { finished } from 'node:stream/promises';
import type { StreamedFile } from '../output/tarball.js';
import type { ScriptFrame, ScriptSink } from './script-text.js';
import type { FrameTextMemo, StackFolder, StackTextMemo } from '../stacks/fold.js';
import type { FrameResolver } from '../stacks/frame-name.js';
import { lineCutDefaults, LongLineCutter } from '../stacks/long-lines.js';
import type { ContentHasher } from '../output/output-hash.js';
import type { HashedFile } from '../output/partial-outputs.js';
import { ScriptNamer } from '../stacks/script-names.js';

/** What the file gets of one distinct frame line (kept on its ScriptFrame), or null when it must go the text way. */
interface FrameBytes extends FrameTextMemo {
  /** Numbers the distinct lines, for the hash of a stack. */
  id: number;
  /** The line as the file has it (named when the resolver names it), newline included. */
  bytes: Buffer;
  /** Bytes of the line as written by perf script's rules, newline included (the manifest counts those). */
  raw: number;
  /** A line over the cut: the text the fold reads, cut as the tee would have cut it. */
  cut?: string;
}

/**
 * One distinct sequence of frame lines, made once and then copied whole for every sample holding it: its lines'
 * bytes in the file, and what the fold keeps of them (StackTextMemo).
 */
interface StackBytes extends StackTextMemo {
  frames: FrameBytes[];
  /** The frame lines as the file has them, one after the other. */
  bytes: Buffer;
  /** Their bytes by perf script's rules (see FrameBytes.raw). */
  raw: number;
  /** The text the fold reads of each line (cut when the line is). */
  lines: string[];
  /** Lines over the cut among them. */
  cut: number;
  /** The next stack with the same hash. */
  next: StackBytes | undefined;
}

const outputBytes = 1 << 20;
/** Bounds on the stacks kept whole: past them, samples of new stacks are copied line by line. */
const maxStacks = 1 << 16;
const maxStackBytes = 64 << 20;
/** Bytes counted against maxStackBytes for each frame of a stack, besides its line's bytes. */
const stackFrameCost = 128;
/** Stacks of one hash kept whole, at most. */
const maxChain = 8;

export class BuiltinScriptOutput implements ScriptSink {
  /** Bytes of perf script text made (before cutting and naming), for the manifest. */
  bytes = 0;
  private readonly file: WriteStream;
  private readonly cutter = new LongLineCutter();
  /** Names the text way's samples; it follows their headers' pids, as the tee's does. */
  private readonly namer: ScriptNamer | undefined;
  /** Names the per-line way's frame lines, whose headers give no pid (see plainHeader). */
  private readonly lineNamer: ScriptNamer | undefined;
  /** The text way's namer last saw a header other than the per-line way's since (which gives it no pid). */
  private namerPidStale = false;
  private readonly entries: FrameBytes[] = [];
  private frameCount = 0;
  /** Stacks made whole, by a hash of their lines' ids. */
  private readonly stacks = new Map<number, StackBytes>();
  private stacksKept = 0;
  private stackBytesKept = 0;
  /** Frame lines over the cut written the per-line way (each cut once, when first made). */
  private framesCut = 0;
  private headerKept: string[] = [];
  /** Hashes the bytes written, and lends the buffers (a hashed buffer comes back for reuse). */
  private readonly hasher: ContentHasher | undefined;
  /** Written buffers back for reuse, without a hasher. */
  private readonly pool: Buffer[] = [];
  private out: Buffer;
  private used = 0;
  /** The size of the buffers filled and written. */
  private readonly outputBytes: number;

  /**
   * `file` is closed by finish() or destroy(); with a hasher, it is given every byte written (see finish()), as is
   * `archive`, the file's entry in prof.tar.gz, which compresses them meanwhile.
   */
  constructor(
    file: FileHandle | HashedFile,
    private readonly folder: StackFolder,
    resolver: FrameResolver | undefined,
    private readonly archive?: StreamedFile,
  ) {
    const handle = 'hasher' in file ? file.file : file;
    this.hasher = 'hasher' in file ? file.hasher : undefined;
    this.outputBytes = this.hasher?.bufferBytes ?? outputBytes;
    this.out = this.buffer(this.outputBytes);
    this.file = handle.createWriteStream();
    // An error surfaces through `once(..., 'drain')` or `finish()`; without a listener it would crash the process.
    this.file.on('error', () => {});
    this.namer = resolver && new ScriptNamer(resolver);
    this.lineNamer = resolver && new ScriptNamer(resolver);
  }

  async header(text: string): Promise<void> {
    const cut = this.cutter.cut(Buffer.from(text));
    this.bytes += Buffer.byteLength(text);
    this.folder.write(cut);
    const lines = cut.toString('utf8').split('\n');
    const end = lines.findIndex((line) => !line.startsWith('#'));
    this.headerKept = end === -1 ? lines : lines.slice(0, end);
    await this.put(this.namer ? this.namer.transform(cut) : cut);
  }

  /** Takes a sample; a promise only when the file has to be waited for. */
  sample(header: string, frames: readonly ScriptFrame[], count: number): void | Promise<void> {
    if (!plainHeader(header)) return this.asText(header, frames, count);
    let hash = count;
    for (let i = 0; i < count; i++) {
      const entry = this.frameBytes(frames[i]!);
      if (!entry) return this.asText(header, frames, count);
      this.entries[i] = entry;
      hash = Math.imul(hash ^ entry.id, 16777619);
    }
    const stack = this.stackBytes(hash, frames, count);
    let size = header.length * 3 + 2;
    if (stack) size += stack.bytes.length;
    else for (let i = 0; i < count; i++) size += this.entries[i]!.bytes.length;
    if (this.used + size > this.out.length) return this.flush(size).then(() => this.fill(header, frames, count, stack));
    this.fill(header, frames, count, stack);
  }

  /** The stack of the sample whose lines are in `entries`, made now when new and within the bounds. */
  private stackBytes(hash: number, frames: readonly ScriptFrame[], count: number): StackBytes | undefined {
    const head = this.stacks.get(hash);
    let depth = 0;
    for (let stack = head; stack !== undefined; stack = stack.next, depth++) {
      if (stack.frames.length !== count) continue;
      let i = 0;
      while (i < count && stack.frames[i] === this.entries[i]) i++;
      if (i === count) return stack;
    }
    // A chain this long is a recording made to collide (the ids follow the order frames first appear in, which
    // perf.data sets): its stacks go line by line, so that no sample walks more than a few stacks.
    if (depth >= maxChain || this.stacksKept >= maxStacks) return undefined;
    const parts = this.entries.slice(0, count);
    let size = 0;
    for (const entry of parts) size += entry.bytes.length;
    // What a stack keeps besides its bytes (its frames and lines, and the frames it keeps alive) counted too.
    const cost = size + count * stackFrameCost;
    if (this.stackBytesKept + cost > maxStackBytes) return undefined;
    const stack: StackBytes = {
      frames: parts,
      bytes: Buffer.concat(
        parts.map((entry) => entry.bytes),
        size,
      ),
      raw: 0,
      lines: [],
      cut: 0,
      next: head,
    };
    for (let i = 0; i < count; i++) {
      const entry = parts[i]!;
      stack.raw += entry.raw;
      stack.lines.push(entry.cut ?? frames[i]!.line);
      if (entry.cut !== undefined) stack.cut++;
    }
    this.stacks.set(hash, stack);
    this.stacksKept++;
    this.stackBytesKept += cost;
    return stack;
  }

  /** Copies a sample whose frame lines are in `entries` into the buffer, which has room for it, and folds it. */
  private fill(header: string, frames: readonly ScriptFrame[], count: number, stack: StackBytes | undefined): void {
    const out = this.out;
    const start = this.used;
    let at = start + out.write(header, start);
    this.folder.writeLine(out, start, at);
    out[at++] = 10;
    this.bytes += at - start;
    if (stack) {
      this.folder.stackText(stack.lines, stack.frames, stack);
      this.framesCut += stack.cut;
      at += stack.bytes.copy(out, at);
      this.bytes += stack.raw;
    } else
      for (let i = 0; i < count; i++) {
        const entry = this.entries[i]!;
        if (entry.cut === undefined) this.folder.frameText(frames[i]!.line, entry);
        else {
          this.folder.frameText(entry.cut, entry);
          this.framesCut++;
        }
        at += entry.bytes.copy(out, at);
        this.bytes += entry.raw;
      }
    out[at++] = 10;
    this.bytes++;
    this.folder.writeLine(out, at, at);
    this.used = at;
    this.namerPidStale = true;
  }

  /** The `#` lines before the first sample. */
  headerLines(): string[] {
    return this.headerKept;
  }

  /** Lines cut for being too long. */
  get linesCut(): number {
    return this.cutter.linesCut + this.framesCut;
  }

  /** Writes what is left and closes the file; then the hasher has every byte written, and its digest is asked for. */
  async finish(): Promise<void> {
    const rest = this.cutter.end();
    if (rest.length > 0) {
      this.folder.write(rest);
      await this.put(this.namer ? this.namer.transform(rest) : rest);
    }
    const held = this.namer?.end();
    if (held && held.length > 0) await this.put(held);
    await this.flush(0);
    this.file.end();
    await finished(this.file);
    // The buffers go to the hasher once the archive has them compressed.
    await this.archive?.end();
    void this.hasher?.digest();
  }

  /** Closes the file without waiting for it (after a failure; the caller deletes it). */
  destroy(): void {
    this.file.destroy();
  }

  private frameBytes(frame: ScriptFrame): FrameBytes | null {
    if (frame.memo !== undefined) return frame.memo as FrameBytes | null;
    const { line } = frame;
    let entry: FrameBytes | null = null;
    if (!/[\n\r]/.test(line)) {
      const raw = Buffer.from(`${line}\n`);
      if (raw.length - 1 <= lineCutDefaults.maxLineBytes)
        entry = { id: this.frameCount++, bytes: this.lineNamer ? this.lineNamer.transform(raw) : raw, raw: raw.length };
      else {
        // A name the target chose (an 8 MB method in its perf map) is cut once here, not made again for every
        // sample: the per-line way then writes and folds the cut line, as the text way would have, and the
        // manifest counts the cut bytes, the only ones made. A cut inside a character goes the text way.
        const cutter = new LongLineCutter();
        const cut = Buffer.concat([cutter.cut(raw), cutter.end()]);
        const text = cut.toString('utf8', 0, cut.length - 1);
        if (Buffer.byteLength(text) === cut.length - 1)
          entry = {
            id: this.frameCount++,
            bytes: this.lineNamer ? this.lineNamer.transform(cut) : cut,
            raw: cut.length,
            cut: text,
          };
      }
    }
    frame.memo = entry;
    return entry;
  }

  /** A sample perf prints on one line (no callchain), the tee's way. */
  oneLine(text: string): Promise<void> {
    return this.asTextOf(text);
  }

  /** The tee's way: the sample's text through the cutter into the fold, and through the namer into the file. */
  private asText(header: string, frames: readonly ScriptFrame[], count: number): Promise<void> {
    let text = `${header}\n`;
    for (let i = 0; i < count; i++) text += `${frames[i]!.line}\n`;
    return this.asTextOf(`${text}\n`);
  }

  private async asTextOf(text: string): Promise<void> {
    const raw = Buffer.from(text);
    this.bytes += raw.length;
    const cut = this.cutter.cut(raw);
    this.folder.write(cut);
    if (!this.namer) return this.put(cut);
    // The tee's namer would have read the previous sample's header, which gave it no pid.
    if (this.namerPidStale) this.namer.transform(Buffer.from('-\n'));
    this.namerPidStale = false;
    await this.put(this.namer.transform(cut));
  }

  private async put(bytes: Buffer): Promise<void> {
    if (this.used + bytes.length > this.out.length) await this.flush(bytes.length);
    this.used += bytes.copy(this.out, this.used);
  }

  /** Writes what the buffer holds, then makes room for `size` more bytes. */
  private async flush(size: number): Promise<void> {
    if (this.used > 0) {
      const [out, used] = [this.out, this.used];
      // The stream holds the bytes until they reach the file, and the archive until it has them compressed: the
      // buffer goes to the hasher (or back to the pool) only then, and the next bytes go to another.
      const hashed = () => {
        if (this.hasher) this.hasher.update(out, used);
        else if (this.pool.length < 4) this.pool.push(out);
      };
      const written = (error?: Error | null) => {
        if (error) return;
        if (this.archive) this.archive.write(out.subarray(0, used), hashed);
        else hashed();
      };
      if (!this.file.write(out.subarray(0, used), written)) await once(this.file, 'drain');
      await this.hasher?.room();
      await this.archive?.room();
      this.out = this.buffer(Math.max(this.outputBytes, size));
    } else if (this.out.length < size) this.out = this.buffer(size);
    this.used = 0;
  }

  private buffer(size: number): Buffer {
    if (this.hasher) return this.hasher.buffer(size);
    const pooled = this.pool.findIndex((b) => b.length >= size);
    return pooled >= 0 ? this.pool.splice(pooled, 1)[0]! : Buffer.allocUnsafeSlow(size);
  }
}

/**
 * A sample header line the fold and the namer read as the tee's text gives it to them: one line, within the cut, not
 * starting like a frame or a comment, and with no `pid/tid` the namer could take a pid from.
 */
function plainHeader(header: string): boolean {
  const first = header.charCodeAt(0);
  return (
    first > 0x20 &&
    first < 0x7f &&
    first !== 0x23 &&
    header.length * 3 <= lineCutDefaults.maxLineBytes &&
    !/[\n\r/]/.test(header)
  );
}

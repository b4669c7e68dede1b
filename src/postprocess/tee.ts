// The tee between perf script and the rest: each chunk of perf-script text goes to the FlameScope file and into the
// fold as it arrives, and the `#` header lines are kept aside for the manifest. Takes chunks, gives a ChunkSink that
// waits for the file when it falls behind (so perf is held back instead of memory growing), plus running counts for
// progress lines. Lines longer than 16 KiB (a name the target chose) are cut first, for both (long-lines.ts). The
// file gets the names profcpu resolved where perf wrote `[unknown]` (script-names.ts).
import type { WriteStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type { StreamedFile } from '../output/tarball.js';
import type { ChunkSink } from '../perf/script.js';
import type { FrameResolver } from '../stacks/frame-name.js';
import { LongLineCutter } from '../stacks/long-lines.js';
import { ScriptNamer } from '../stacks/script-names.js';

/** How much of the start of the text may hold header lines; perf's header is a few KB. */
const headerLimit = 256 * 1024;

export interface TeeCounts {
  bytes: number;
  /** Samples seen so far: blank lines ending a sample (an estimate for progress only; the fold counts exactly). */
  samples: number;
}

export class PerfScriptTee {
  readonly counts: TeeCounts = { bytes: 0, samples: 0 };
  private readonly file: WriteStream;
  private header: Buffer[] = [];
  private headerBytes = 0;
  private headerDone = false;
  private lastByte = -1;
  private readonly cutter = new LongLineCutter();
  private namer: ScriptNamer | undefined;

  /**
   * `fold` receives every chunk in order; `file` (closed by finish or destroy) gets a byte-for-byte copy, and so does
   * `archive`, the file's entry in prof.tar.gz, which compresses it meanwhile.
   */
  constructor(
    file: FileHandle,
    private readonly fold: (chunk: Uint8Array) => void,
    private readonly archive?: StreamedFile,
  ) {
    this.file = file.createWriteStream();
    // An error surfaces through `once(..., 'drain')` or `finish()`; without a listener it would crash the process.
    this.file.on('error', () => {});
  }

  readonly sink: ChunkSink = async (raw) => {
    this.counts.bytes += raw.length;
    await this.pass(this.cutter.cut(raw));
  };

  /**
   * From now on the FlameScope file gets the names `resolver` gives to perf's `[unknown]` frames (script-names.ts).
   * Call it before the first chunk.
   */
  nameFrames(resolver: FrameResolver): void {
    if (this.counts.bytes === 0) this.namer = new ScriptNamer(resolver);
  }

  /** Frame lines of the FlameScope file that carry a name perf did not know. */
  get framesNamed(): number {
    return this.namer?.named ?? 0;
  }

  /** Lines cut for being too long. */
  get linesCut(): number {
    return this.cutter.linesCut;
  }

  /** Flushes and closes the file. */
  async finish(): Promise<void> {
    const rest = this.cutter.end();
    if (rest.length > 0) await this.pass(rest);
    const held = this.namer?.end();
    if (held && held.length > 0) await this.put(held);
    this.file.end();
    await finished(this.file);
    await this.archive?.end();
  }

  private async pass(chunk: Buffer): Promise<void> {
    if (chunk.length === 0) return;
    if (!this.headerDone) this.keepHeader(chunk);
    this.countSamples(chunk);
    this.fold(chunk);
    const text = this.namer ? this.namer.transform(chunk) : chunk;
    if (text.length > 0) await this.put(text);
  }

  /** Bytes for the file and the archive (neither changes them, nor does this class after). */
  private async put(text: Buffer): Promise<void> {
    this.archive?.write(text, () => {});
    if (!this.file.write(text)) await once(this.file, 'drain');
    await this.archive?.room();
  }

  /** Closes the file without waiting for it (after a failure; the caller deletes it). */
  destroy(): void {
    this.file.destroy();
  }

  /** The `#` lines perf printed before the first sample. */
  headerLines(): string[] {
    const lines = Buffer.concat(this.header).toString('utf8').split('\n');
    const end = lines.findIndex((line) => !line.startsWith('#'));
    return end === -1 ? lines : lines.slice(0, end);
  }

  private keepHeader(chunk: Buffer): void {
    this.header.push(chunk);
    this.headerBytes += chunk.length;
    // Done once a line not starting with `#` has begun (or enough is kept); `lastByte` is still the previous chunk's.
    const atLineStart = this.lastByte === -1 || this.lastByte === 10;
    if (
      this.headerBytes >= headerLimit ||
      (atLineStart && chunk.length > 0 && chunk[0] !== 0x23) ||
      /\n[^#]/.test(chunk.toString('latin1'))
    ) {
      this.headerDone = true;
    }
  }

  private countSamples(chunk: Buffer): void {
    if (chunk.length === 0) return;
    if (this.lastByte === 10 && chunk[0] === 10) this.counts.samples++;
    for (let at = chunk.indexOf('\n\n'); at !== -1; at = chunk.indexOf('\n\n', at + 1)) this.counts.samples++;
    this.lastByte = chunk[chunk.length - 1]!;
  }
}

// The ReadyToRun name tables of an output folder: what the readytorun step writes and the resolver reads, so that
// postprocess names precompiled code after the target is gone, here or elsewhere.
//   target/readytorun.json            { images: [{ path, assembly, mvid, file, methods, sections }] }
//   target/readytorun/<mvid>.map.gz   gzip of perf-map lines `<rva hex> <size hex> <name>`, one per code block
// A received folder is untrusted: the index and tables are read capped, decompression is capped per table and over
// all tables, entries that are not sane or repeat a path are dropped, a table listed twice is loaded once, and names
// cannot add lines (control characters were made `?` when written).

import { promisify } from 'node:util';
import { gunzip as gunzipCallback, gzip as gzipCallback } from 'node:zlib';
import { layout } from '../../output/layout.js';
import type { Warn } from '../../diagnostics.js';
import { OutputFolder, outputModes } from '../../files/output-folder.js';
import { oneLine } from '../../stacks/frame-name.js';
import { CodeMap } from '../../formats/jit/code-map.js';
import { fileOffsetToRva, type PeSection } from './pe-image.js';
import { readPerfMap } from '../../formats/jit/perfmap.js';
import type { ReadyToRunNames } from './readytorun.js';

const gzip = promisify(gzipCallback);
const gunzip = promisify(gunzipCallback);

/** One image's entry in the index. */
export interface ReadyToRunImageEntry {
  /** Where the target mapped it (its /proc/PID/maps name). */
  path: string;
  assembly: string;
  mvid: string;
  /** The table's path in the folder. */
  file: string;
  methods: number;
  /** [virtualAddress, virtualSize, rawOffset, rawSize] per section. */
  sections: [number, number, number, number][];
}

export const readyToRunStoreLimits = Object.freeze({
  /** The index, read whole. */
  indexBytes: 16 << 20,
  /** One compressed table. */
  tableBytes: 64 << 20,
  /** One table decompressed (CoreLib's is about 7 MB). */
  tableTextBytes: 256 << 20,
  /** All tables decompressed together: a sent index may list thousands of distinct tables. */
  totalTextBytes: 1 << 30,
  images: 4096,
  timeoutMs: 60_000,
});

const mvidPattern = /^[0-9a-f]{32}$/;

export function tableFile(mvid: string): string {
  return `${layout.readyToRunDir}/${mvid}.map.gz`;
}

/** Writes one image's table; the caller adds the returned entry to the index. */
export async function writeReadyToRunTable(
  folder: OutputFolder,
  path: string,
  names: ReadyToRunNames,
): Promise<ReadyToRunImageEntry> {
  const lines = names.methods.map(
    (m) => `${m.start.toString(16)} ${(m.end - m.start).toString(16)} ${oneLine(m.name)}\n`,
  );
  const file = tableFile(names.mvid);
  // create() makes target/readytorun as needed, private like the file, never through a link.
  await folder.writeFile(file, await gzip(lines.join('')), outputModes.privateFile);
  return {
    path,
    assembly: oneLine(names.assembly),
    mvid: names.mvid,
    file,
    methods: names.methods.length,
    sections: names.sections.map((s) => [s.virtualAddress, s.virtualSize, s.rawOffset, s.rawSize]),
  };
}

export async function writeReadyToRunIndex(
  folder: OutputFolder,
  images: readonly ReadyToRunImageEntry[],
): Promise<void> {
  const sorted = [...images].sort((a, b) => a.path.localeCompare(b.path));
  await folder.writeFile(
    layout.readyToRunIndex,
    `${JSON.stringify({ images: sorted }, null, 2)}\n`,
    outputModes.privateFile,
  );
}

/** The index's sane entries (empty when there is none). */
export async function readReadyToRunIndex(folder: OutputFolder): Promise<ReadyToRunImageEntry[]> {
  const read = await folder
    .read(layout.readyToRunIndex, { maxBytes: readyToRunStoreLimits.indexBytes, timeoutMs: 10_000 })
    .catch(() => undefined);
  if (!read || read.truncated) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(read.bytes.toString('utf8'));
  } catch {
    return [];
  }
  const list = (parsed as { images?: unknown } | null)?.images;
  if (!Array.isArray(list)) return [];
  const sane = (list.slice(0, readyToRunStoreLimits.images) as Partial<ReadyToRunImageEntry>[]).filter(
    (e): e is ReadyToRunImageEntry =>
      typeof e?.path === 'string' &&
      e.path.length < 4096 &&
      typeof e.mvid === 'string' &&
      mvidPattern.test(e.mvid) &&
      e.file === tableFile(e.mvid) &&
      typeof e.assembly === 'string' &&
      typeof e.methods === 'number' &&
      Array.isArray(e.sections) &&
      e.sections.length <= 96 &&
      e.sections.every((s) => Array.isArray(s) && s.length === 4 && s.every((n) => Number.isSafeInteger(n) && n >= 0)),
  );
  // The step writes one entry per mapped path: a repeat is the same image again, or a hostile copy.
  const byPath = new Map<string, ReadyToRunImageEntry>();
  for (const e of sane) if (!byPath.has(e.path)) byPath.set(e.path, e);
  return [...byPath.values()];
}

/** An image's names, looked up by the file offset perf prints for a frame in its mapping. */
export class ImageNames {
  private readonly sections: PeSection[];

  constructor(
    readonly entry: ReadyToRunImageEntry,
    private readonly code: CodeMap,
  ) {
    this.sections = entry.sections.map(([virtualAddress, virtualSize, rawOffset, rawSize]) => ({
      name: '',
      virtualAddress,
      virtualSize,
      rawOffset,
      rawSize,
    }));
  }

  /** The method at file offset `offset`, or undefined. */
  lookupFileOffset(offset: bigint): string | undefined {
    const rva = fileOffsetToRva(this.sections, Number(offset));
    return rva === undefined ? undefined : this.code.lookupName(BigInt(rva));
  }
}

/**
 * Loads every table the index lists, each file once however many images share it (one assembly mapped at two paths),
 * and all of them within totalTextBytes decompressed; a table that cannot be read, or past that total, is a warning
 * and is left out.
 */
export async function loadImageNames(folder: OutputFolder, warn: Warn): Promise<ImageNames[]> {
  const loaded: ImageNames[] = [];
  const tables = new Map<string, CodeMap | undefined>();
  let textLeft = readyToRunStoreLimits.totalTextBytes;
  for (const entry of await readReadyToRunIndex(folder)) {
    if (!tables.has(entry.file)) tables.set(entry.file, undefined);
    else {
      const code = tables.get(entry.file);
      if (code) loaded.push(new ImageNames(entry, code));
      continue;
    }
    try {
      if (textLeft <= 0) throw new Error(`all tables together past ${readyToRunStoreLimits.totalTextBytes} bytes`);
      const read = await folder.read(entry.file, {
        maxBytes: readyToRunStoreLimits.tableBytes,
        timeoutMs: readyToRunStoreLimits.timeoutMs,
      });
      if (read.truncated) throw new Error(`larger than ${readyToRunStoreLimits.tableBytes} bytes`);
      const text = await gunzip(read.bytes, {
        maxOutputLength: Math.min(readyToRunStoreLimits.tableTextBytes, textLeft),
      });
      textLeft -= text.length;
      const code = new CodeMap(readPerfMap(text).symbols);
      tables.set(entry.file, code);
      loaded.push(new ImageNames(entry, code));
    } catch (error) {
      warn(`could not read ${entry.file} (${(error as Error).message}): ${entry.assembly} frames stay unnamed`);
    }
  }
  return loaded;
}

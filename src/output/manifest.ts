// manifest.json: what an output folder holds and how it was made. Takes the facts gathered by a postprocess run (and
// whatever collect adds: target, its own commands and timings) plus the folder's files; gives a JSON document with
// sorted keys and each file's size and SHA-256. The manifest cannot hash itself, nor the tarball that contains it:
// it says so in `unhashed`.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { RecordingHeader } from '../perf/version.js';
import type { NamingQuality } from '../stacks/fold.js';
import { layout } from './layout.js';

export interface ManifestFile {
  /** Relative to the output folder, `/`-separated (layout.ts names). */
  path: string;
  bytes: number;
  sha256: string;
}

/** What a postprocess run gathers; the manifest adds tool, files and the note on what it cannot hash. */
export interface ManifestFacts {
  /** When this manifest was written (ISO 8601, UTC). The only wall-clock time in the outputs. */
  createdAt: string;
  /** The machine that post-processed (which may not be the one that recorded: see `recording`). */
  host: { hostname: string; kernelRelease: string; perfVersion: string; node: string; platform: string; arch: string };
  /** What perf.data's own header says about the recording machine and command. */
  recording: RecordingHeader;
  postprocess: {
    /** Who read perf.data: perf script (`perf`) or profcpu's own reader (`native`). */
    engine?: 'perf' | 'native';
    /** Why perf script read it where the built-in engine was meant to (src/engine/engine-choice.ts). */
    handOver?: string;
    /** Each external command run, as an argv, in the output folder. */
    commands: string[][];
    /** Wall time of each phase, in milliseconds. */
    durationsMs: Record<string, number>;
    /** Bytes of perf script text. */
    perfScriptBytes: number;
    /** Lines of perf script text cut for being longer than 16 KiB, when there were any. */
    linesCut?: number;
    /** perf script ran in a PID namespace of its own, blind to the live target (src/perf/script.ts). */
    perfScriptIsolated: boolean;
    /** Where perf maps were placed for perf script, and from which copy. */
    perfMaps: { from: string; placedAt: string }[];
    /**
     * The perf maps the built-in engine named JIT code from, per process (the PID perf recorded): the file (relative
     * to the folder, or this machine's /tmp/perf-<pid>.map), where it came from, its entries.
     */
    jitMaps?: { pid: number; file: string; origin: 'snapshot' | 'folder' | 'machine'; symbols: number }[];
    /**
     * Files whose calls through `.plt.sec` perf 6.1 names wrongly, named `<target>@plt` instead, as perf 6.3 and later
     * name them (src/engine/plt-rename.ts): where the flame graph differs from perf 6.1's on purpose.
     */
    pltRenamed?: string[];
    /**
     * The built-in engine's unwinding of a DWARF recording's user stacks (src/engine/unwind/sample-unwind.ts): samples
     * unwound, those stepped by frame pointers through code without CFI (JIT code: where perf script's frames stop),
     * and why each walk stopped (`end`: at the thread's start).
     */
    unwound?: { samples: number; framePointerSamples: number; stops: Record<string, number> };
    /** Binaries of target/binaries perf script read (this machine's build-id cache had no copy of them). */
    keptBinariesPlaced: number;
    /** perf.data was not finished (perf killed with the target) and was completed: what it held. */
    recovered?: { dataBytes: number; samples: number | undefined; cutBytes: number };
  };
  samples: {
    parsed: number;
    kept: number;
    weight: number;
    distinctStacks: number;
    events: string[];
    /** Samples of each event (the first seen is folded unless --event-filter names another). */
    byEvent?: Record<string, number>;
    /** The event folded. */
    folded?: string;
  };
  /** Lines or samples the fold skipped, by kind. */
  skipped: Record<string, number>;
  naming: NamingQuality;
}

export interface Manifest extends ManifestFacts {
  /** Bumped when a field changes meaning. */
  manifestVersion: 1;
  tool: { name: string; version: string };
  files: ManifestFile[];
  unhashed: { files: string[]; reason: string };
  /** Anything the caller adds (collect: target, commands, timings). */
  [extra: string]: unknown;
}

export const unhashedFiles: readonly string[] = Object.freeze([layout.manifest, layout.tarball]);

/**
 * Assembles the manifest. Keys of `extra` that name one of the manifest's own fields are not allowed to replace it;
 * they are returned in `collisions` so the caller can warn.
 */
export function buildManifest(
  tool: Manifest['tool'],
  facts: ManifestFacts,
  files: ManifestFile[],
  extra: Record<string, unknown> = {},
): { manifest: Manifest; collisions: string[] } {
  const own: Manifest = {
    ...facts,
    manifestVersion: 1,
    tool,
    files: [...files].sort((a, b) => compareBytes(a.path, b.path)),
    unhashed: {
      files: [...unhashedFiles],
      reason: 'manifest.json cannot contain its own hash, and prof.tar.gz contains manifest.json',
    },
  };
  const collisions = Object.keys(extra).filter((key) => key in own);
  return { manifest: { ...extra, ...own }, collisions };
}

/**
 * JSON with every object's keys sorted (arrays keep their order), two-space indent, trailing newline. Also for a
 * dump folder's manifest (src/dump/dump-manifest.ts).
 */
export function formatManifest(manifest: object): string {
  return `${JSON.stringify(sortKeys(manifest), null, 2)}\n`;
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== 'object') return value;
  if (value instanceof Map) return sortKeys(Object.fromEntries(value));
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return Object.fromEntries(entries.sort(([a], [b]) => compareBytes(a, b)).map(([k, v]) => [k, sortKeys(v)]));
}

/** Size and SHA-256 of each file (paths relative to `dir`), read as streams so perf.data is never held whole. */
export async function hashFiles(dir: string, paths: readonly string[], signal?: AbortSignal): Promise<ManifestFile[]> {
  const files: ManifestFile[] = [];
  for (const path of paths) {
    signal?.throwIfAborted();
    const full = join(dir, path);
    const hash = createHash('sha256');
    let bytes = 0;
    for await (const chunk of createReadStream(full, { signal }) as AsyncIterable<Buffer>) {
      hash.update(chunk);
      bytes += chunk.length;
    }
    files.push({ path, bytes, sha256: hash.digest('hex') });
  }
  return files;
}

/** The Node runtime and platform (read-only facts about this process, for the manifest's `host`). */
export function runtimeFacts(): { node: string; platform: string; arch: string } {
  return { node: process.version, platform: process.platform, arch: process.arch };
}

/** profcpu's name and version, from its package.json (found the same way from src/ and dist/). */
export async function toolInfo(): Promise<Manifest['tool']> {
  const text = await readFile(new URL('../../package.json', import.meta.url), 'utf8');
  const pkg = JSON.parse(text) as { name?: string; version?: string };
  return { name: pkg.name ?? 'profcpu', version: pkg.version ?? '0.0.0' };
}

function compareBytes(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}

// Which native libraries get their debug files fetched: a mode, the files the target maps executable and the files
// perf sampled in; the libraries to examine out, in the order they are served under a cap (libcoreclr.so first: it
// names the runtime's frames, GC and JIT helpers; then by path), each with the build-id perf recorded when known.
// Whether a library lacks symbols is decided later, by reading it (debug-symbols.ts). Pure.
import { basename } from 'node:path';
import type { SampledFile } from '../perf/buildid-cache.js';

/**
 * sampled: libcoreclr.so and every file perf sampled (what collect does by default); coreclr: libcoreclr.so only;
 * all: every file mapped executable.
 */
export type LibrarySelection = 'sampled' | 'coreclr' | 'all';

export const librarySelections: readonly LibrarySelection[] = Object.freeze(['sampled', 'coreclr', 'all']);

export interface LibraryCandidates {
  /** Paths of the files the target maps executable (/proc/PID/maps); empty when the maps could not be read. */
  mapped: readonly string[];
  /** The files perf sampled (`perf buildid-list --with-hits`); read in sampled mode only. */
  sampled?: readonly SampledFile[];
}

export interface WantedLibrary {
  /** The path as the target sees it. */
  path: string;
  /** The build-id perf recorded for it (sampled files): the file read must still have it. */
  buildId?: string;
}

export function isCoreclr(path: string): boolean {
  return basename(path) === 'libcoreclr.so';
}

/**
 * True for a path that names a file in the target's file system; false for what perf and /proc name without one: the
 * kernel and vdso (`[kernel.kallsyms]`), perf maps and JIT dumps in /tmp, anonymous, memfd and deleted mappings.
 */
export function isTargetFilePath(path: string): boolean {
  return (
    path.startsWith('/') &&
    !path.startsWith('//') &&
    !path.startsWith('/memfd:') &&
    !/^\/tmp\/(perf-\d+\.map|jit-\d+\.dump)$/.test(path) &&
    !path.endsWith(' (deleted)')
  );
}

/** The libraries `mode` asks for, once each, libcoreclr.so first, then by path. */
export function selectLibraries(mode: LibrarySelection, candidates: LibraryCandidates): WantedLibrary[] {
  const mapped = candidates.mapped.filter(isTargetFilePath);
  const wanted = new Map<string, WantedLibrary>();
  const add = (library: WantedLibrary) => {
    if (!wanted.has(library.path)) wanted.set(library.path, library);
  };
  if (mode === 'all') for (const path of mapped) add({ path });
  else for (const path of mapped.filter(isCoreclr)) add({ path });
  if (mode === 'sampled')
    for (const file of candidates.sampled ?? []) {
      if (!isTargetFilePath(file.path)) continue;
      // perf's build-id is the one its samples need a debug file for: it wins over a mapping seen without one.
      wanted.set(file.path, { path: file.path, buildId: file.buildId });
    }
  return [...wanted.values()].sort(
    (a, b) => Number(isCoreclr(b.path)) - Number(isCoreclr(a.path)) || (a.path < b.path ? -1 : a.path > b.path ? 1 : 0),
  );
}

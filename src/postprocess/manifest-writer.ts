// Writes manifest.json for a postprocess run: takes the facts the run gathered, the hashes of the raw data (taken
// while perf script ran, on a worker thread) and the caller's extra fields; takes the outputs' hashes (made as they
// were written, or read back), assembles the manifest and writes it through the run's partial outputs (committed by
// the caller).
import { lstat } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { layout } from '../output/layout.js';
import {
  buildManifest,
  formatManifest,
  hashFiles,
  runtimeFacts,
  toolInfo,
  unhashedFiles,
  type Manifest,
  type ManifestFacts,
  type ManifestFile,
} from '../output/manifest.js';
import { listFolder } from '../output/tarball.js';
import type { Warn } from '../diagnostics.js';
import { kernelRelease } from '../perf/version.js';
import type { HashWorker } from '../output/output-hash.js';
import type { PartialOutputs } from '../output/partial-outputs.js';

/** Size and SHA-256 of perf.data and the target/ snapshots: the files a run never changes. */
export async function hashRawData(
  dir: string,
  hashing: HashWorker,
  signal: AbortSignal | undefined,
): Promise<ManifestFile[]> {
  // Only a real folder: a `target` link in a folder somebody sent would have its destination hashed and listed.
  const real = await lstat(join(dir, layout.targetDir)).then(
    (s) => s.isDirectory(),
    () => false,
  );
  const target = real ? await listFolder(join(dir, layout.targetDir)) : { entries: [], isDir: [] };
  const snapshots = target.entries.filter((_, i) => !target.isDir[i]).map((p) => `${layout.targetDir}/${p}`);
  return hashing.hashFiles(dir, [layout.perfData, ...snapshots], signal);
}

/** The machine post-processing, for the manifest's `host`. */
export async function hostFacts(perfVersion: Promise<string>): Promise<ManifestFacts['host']> {
  return { hostname: hostname(), kernelRelease: kernelRelease(), perfVersion: await perfVersion, ...runtimeFacts() };
}

export async function writeManifest(
  dir: string,
  outputs: PartialOutputs,
  facts: ManifestFacts,
  context: {
    rawHashes: Promise<ManifestFile[]>;
    extra: Record<string, unknown> | undefined;
    warn: Warn;
    signal: AbortSignal | undefined;
  },
): Promise<Manifest> {
  // Everything in the folder but the manifest and the tarball (and their partial files), raw data included.
  const listing = await listFolder(dir, new Set(unhashedFiles.flatMap((f) => [f, `${f}.partial`])));
  const raw = await context.rawHashes;
  const hashedRaw = new Set(raw.map((file) => file.path));
  const rest = listing.entries.filter((path, i) => !listing.isDir[i] && !hashedRaw.has(path));
  // What this run wrote was hashed as it was written: only other files are read.
  const files = [...raw];
  for (const path of rest) {
    const written = await outputs.writtenHash(path)?.catch(() => undefined);
    if (written) files.push({ path, bytes: written.bytes, sha256: written.sha256 });
    else files.push(...(await hashFiles(dir, [path], context.signal)));
  }
  const { manifest, collisions } = buildManifest(await toolInfo(), facts, files, context.extra);
  for (const key of collisions) context.warn(`manifest: the caller's "${key}" is left out (a manifest field)`);
  await outputs.write(layout.manifest, formatManifest(manifest));
  return manifest;
}

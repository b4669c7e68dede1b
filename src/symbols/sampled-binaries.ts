// The native binaries a recording sampled, copied into perf's build-id cache, so that `perf script` still names their
// frames once the target is gone. perf record would copy them itself, but it copies any sampled file whole, however
// large, reading it through links in the target's file system; profcpu records with -N (no copy) and does it here
// instead: the perf.data (its sampled build-ids) and the target's files (TargetFiles: inside its root, capped) in;
// `elf` files in perf's cache entries out, for ELF files only, whose build-id matches the recording, up to a size per
// file and in all, skipping what the cache already holds. Runs as a collect step after the recording.
import { randomBytes } from 'node:crypto';
import { lstat, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { layout } from '../bundle/layout.js';
import type { CollectStep, StepContext, StepReport } from '../collect/steps.js';
import { copyRange, openForReading, withDeadline } from '../files/bounded-read.js';
import { createExclusive, outputModes } from '../files/output-folder.js';
import { isMissing, RootedPathError } from '../files/rooted.js';
import { buildIdEntry, perfBuildIdDir, sampledFiles, type SampledFile } from '../perf/buildid-cache.js';
import { TargetFiles } from '../target/target-files.js';
import { fileByteSource, readElf } from './elf.js';

export interface SampledBinariesOptions {
  /** Largest binary copied. Default 256 MiB: libcoreclr.so is about 7 MB; a larger "library" is skipped. */
  maxFileBytes: number;
  /** Bytes copied in one run at most. Default 1 GiB. */
  maxTotalBytes: number;
  /** Time allowed for one copy, ms. Default 60 s. */
  copyTimeoutMs: number;
}

export const sampledBinariesDefaults: Readonly<SampledBinariesOptions> = Object.freeze({
  maxFileBytes: 256 << 20,
  maxTotalBytes: 1 << 30,
  copyTimeoutMs: 60_000,
});

export interface CachedBinary {
  path: string;
  buildId: string;
  /** copied: now; present: already in the cache; skipped: refused (reason says why); missing: not in the target. */
  status: 'copied' | 'present' | 'skipped' | 'missing';
  bytes?: number;
  reason?: string;
}

/** Paths perf lists that are no file in the target: the kernel, vdso, perf maps, JIT dumps, anonymous memory. */
function isTargetFile(path: string): boolean {
  return (
    path.startsWith('/') && !path.startsWith('/tmp/perf-') && !path.startsWith('//') && !/ \(deleted\)$/.test(path)
  );
}

/** Copies the sampled binaries of `files`' target into `buildIdDir`; one entry per sampled file. */
export async function cacheSampledBinaries(
  sampled: readonly SampledFile[],
  files: TargetFiles,
  buildIdDir: string,
  options: Partial<SampledBinariesOptions> = {},
): Promise<CachedBinary[]> {
  const opts = { ...sampledBinariesDefaults, ...options };
  const results: CachedBinary[] = [];
  let total = 0;
  for (const { path, buildId } of sampled.filter((f) => isTargetFile(f.path))) {
    const skip = (reason: string): CachedBinary => ({ path, buildId, status: 'skipped', reason });
    let handle;
    try {
      handle = await files.lookup(path, 'file');
    } catch (error) {
      const missing = isMissing(error) || !(error instanceof RootedPathError);
      results.push(missing ? { path, buildId, status: 'missing' } : skip(error.reason));
      continue;
    }
    try {
      const size = handle.stat.size;
      const entry = await buildIdEntry(buildIdDir, buildId, path);
      const elf = join(entry, 'elf');
      const present = await lstat(elf).catch(() => undefined);
      if (present?.isFile() && present.size === size) {
        results.push({ path, buildId, status: 'present', bytes: size });
        continue;
      }
      if (size > opts.maxFileBytes) {
        results.push(skip(`${size} bytes, more than the ${opts.maxFileBytes}-byte limit`));
        continue;
      }
      if (total + size > opts.maxTotalBytes) {
        results.push(skip(`the ${opts.maxTotalBytes}-byte limit for one run is reached`));
        continue;
      }
      const reason = await withDeadline({ timeoutMs: opts.copyTimeoutMs }, path, async (live) => {
        const source = await openForReading(handle);
        try {
          const found = (
            await readElf(
              fileByteSource(source, size, (cause) => cause as Error),
              path,
            ).catch(() => undefined)
          )?.buildId;
          if (found !== buildId) return found ? `its build-id is now ${found}` : 'not an ELF file with a build-id';
          await copyInto(source, elf, size, live);
          return undefined;
        } finally {
          await source.close();
        }
      });
      if (reason) results.push(skip(reason));
      else {
        total += size;
        results.push({ path, buildId, status: 'copied', bytes: size });
      }
    } catch (error) {
      results.push(skip(error instanceof Error ? error.message : String(error)));
    } finally {
      await handle.close();
    }
  }
  return results;
}

/** Copies the whole source to `elf` through a private temporary file created exclusively, then renamed. */
async function copyInto(
  source: Awaited<ReturnType<typeof openForReading>>,
  elf: string,
  size: number,
  live: () => boolean,
): Promise<void> {
  const temp = `${elf}.${randomBytes(6).toString('hex')}`;
  const dest = await createExclusive(temp, outputModes.privateFile);
  try {
    const { bytes } = await copyRange(source, dest, 0, size, live);
    await dest.truncate(bytes);
    await dest.close();
    await rename(temp, elf);
  } catch (error) {
    await dest.close().catch(() => undefined);
    await rm(temp, { force: true });
    throw error;
  }
}

/** The collect step: after recording, the sampled binaries of the target into perf's build-id cache. */
export function sampledBinariesStep(options: Partial<SampledBinariesOptions> & { buildIdDir?: string } = {}) {
  const step: CollectStep = {
    name: 'binaries',
    async afterRecording(context: StepContext): Promise<StepReport> {
      const exec = { perfPath: context.perfPath, signal: context.signal };
      const buildIdDir = options.buildIdDir ?? (await perfBuildIdDir(exec));
      const sampled = await sampledFiles(join(context.dir, layout.perfData), exec);
      // The session's view of the target, opened before it could exit (a pid cannot be opened once it has).
      const files =
        context.files ??
        (await TargetFiles.open(context.target.pid, {
          procRoot: context.procRoot,
          uid: context.target.uid,
          signal: context.signal,
        }));
      try {
        const binaries = await cacheSampledBinaries(sampled, files, buildIdDir, options);
        for (const b of binaries.filter((b) => b.status === 'skipped'))
          context.warn(`${b.path} is not kept for naming after the target exits: ${b.reason}`);
        return { buildIdDir, binaries };
      } finally {
        if (!context.files) await files.close();
      }
    },
  };
  return step;
}

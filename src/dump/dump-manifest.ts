// manifest.json of a dump folder: what each dump is (type, target, how it was asked for, size, SHA-256, timings).
// Takes the folder and one more entry; gives the manifest with the entry appended, written afresh (a partial file
// renamed over the old one) under a lock file, so that dumps taken at once into one folder lose no entry. A folder whose manifest.json is another kind (collect's) or unreadable is refused rather
// than overwritten: dumps go in a folder of their own.
import { setTimeout as sleep } from 'node:timers/promises';
import { ProfcpuError } from '../error.js';
import { formatManifest, toolInfo, type Manifest } from '../output/manifest.js';
import { layout } from '../output/layout.js';
import type { OutputFolder } from '../files/output-folder.js';
import { outputModes } from '../files/output-folder.js';
import type { DumpTypeName } from '../dotnet/ipc/dump-protocol.js';

export interface DumpEntry {
  /** The dump's file name in the folder. */
  file: string;
  type: DumpTypeName;
  /** When the dump was asked for (ISO 8601, UTC). */
  takenAt: string;
  bytes: number;
  sha256: string;
  /** The IPC command the runtime answered (GenerateCoreDump3, 2 or the first). */
  command: string;
  target: {
    pid: number;
    nspid: number;
    commandLine: string[];
    runtimeVersion?: string;
    /** Where the runtime wrote it, in the target's file system (removed once copied). */
    writtenAt: string;
  };
  durationsMs: { dump: number; copy: number };
}

export interface DumpManifest {
  manifestVersion: 1;
  kind: 'dump';
  tool: Manifest['tool'];
  dumps: DumpEntry[];
}

const maxManifestBytes = 4 << 20;

async function readExisting(folder: OutputFolder): Promise<DumpManifest | undefined> {
  if (!(await folder.lstat(layout.manifest))) return undefined;
  const refuse = (why: string, cause?: unknown) =>
    new ProfcpuError('USAGE', `${folder.path}/${layout.manifest} ${why}: dumps are not added to it`, {
      remedy: 'Give dump an output folder of its own (--output), or none for a new one.',
      cause,
    });
  let parsed: unknown;
  try {
    const { bytes, truncated } = await folder.read(layout.manifest, { maxBytes: maxManifestBytes, timeoutMs: 10_000 });
    if (truncated) throw refuse(`is larger than ${maxManifestBytes} bytes`);
    parsed = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    if (error instanceof ProfcpuError && error.code === 'USAGE') throw error;
    throw refuse('cannot be read as JSON', error);
  }
  const manifest = parsed as Partial<DumpManifest> | null;
  if (manifest?.kind !== 'dump' || !Array.isArray(manifest.dumps))
    throw refuse('is not a dump folder’s (a collect output folder?)');
  return manifest as DumpManifest;
}

/** Fails early (before any dump is taken) when the folder's manifest.json is not a dump folder's. */
export async function checkDumpFolder(folder: OutputFolder): Promise<void> {
  await readExisting(folder);
}

/**
 * Appends `entry` to the manifest under the folder's lock: another dump into the same folder at the same time re-reads
 * what this one wrote instead of overwriting it.
 */
export async function recordDump(folder: OutputFolder, entry: DumpEntry): Promise<DumpManifest> {
  return withManifestLock(folder, () => appendEntry(folder, entry));
}

/**
 * Gives the complete dump `incoming` (a name of the folder no other dump uses) the next free dump name and lists it,
 * both under the folder's lock, so that dumps taken at once into one folder never take the same name nor lose an
 * entry. Gives the entry with its file name.
 */
export async function addDump(
  folder: OutputFolder,
  incoming: string,
  entry: Omit<DumpEntry, 'file'>,
): Promise<DumpEntry> {
  let kept = incoming;
  try {
    return await withManifestLock(folder, async () => {
      const file = await nextDumpName(folder, entry.type, entry.target.nspid);
      await folder.rename(incoming, file);
      kept = file;
      const named: DumpEntry = { file, ...entry };
      await appendEntry(folder, named);
      return named;
    });
  } catch (error) {
    throw new ProfcpuError('IO', `the dump was kept as ${folder.path}/${kept} but is not listed in its manifest.json`, {
      remedy: error instanceof ProfcpuError && error.remedy ? `${error.message}; ${error.remedy}` : String(error),
      cause: error,
    });
  }
}

async function appendEntry(folder: OutputFolder, entry: DumpEntry): Promise<DumpManifest> {
  const existing = await readExisting(folder);
  const manifest: DumpManifest = {
    manifestVersion: 1,
    kind: 'dump',
    tool: await toolInfo(),
    dumps: [...(existing?.dumps ?? []), entry],
  };
  const partial = `${layout.manifest}.partial`;
  await folder.writeFile(partial, formatManifest(manifest), outputModes.file);
  await folder.rename(partial, layout.manifest);
  return manifest;
}

const lockName = `${layout.manifest}.lock`;
/** How long a dump waits for another's manifest update (a few milliseconds of work), ms. */
const lockWaitMs = 10_000;
/** A lock older than this was left by a dump killed while holding it, ms. */
const staleLockMs = 60_000;

/** Runs `work` holding `manifest.json.lock`, a file created exclusively (it works across processes and sidecars). */
async function withManifestLock<T>(folder: OutputFolder, work: () => Promise<T>): Promise<T> {
  const started = performance.now();
  for (;;) {
    const lock = await folder.createNew(lockName, outputModes.privateFile);
    if (lock) {
      await lock.close();
      break;
    }
    if (performance.now() - started > lockWaitMs)
      throw new ProfcpuError(
        'IO',
        `${folder.path}/${lockName} is held by another dump for more than ${lockWaitMs / 1000} s`,
        {
          remedy: 'If no other profcpu dump is writing to that folder, remove that file.',
        },
      );
    const held = await folder.lstat(lockName);
    if (held?.isFile() && Date.now() - held.mtimeMs > staleLockMs) await folder.remove(lockName);
    else await sleep(10 + Math.random() * 40);
  }
  try {
    return await work();
  } finally {
    await folder.remove(lockName);
  }
}

/** A name for the next dump that no file of the folder carries yet: `dump-<type>-<nspid>-<n>.core`. */
export async function nextDumpName(folder: OutputFolder, type: DumpTypeName, nspid: number): Promise<string> {
  for (let n = 1; n <= 10_000; n++) {
    const name = `dump-${type}-${nspid}-${n}.core`;
    if (!(await folder.lstat(name)) && !(await folder.lstat(`${name}.partial`))) return name;
  }
  throw new ProfcpuError('IO', `${folder.path} holds 10000 dumps of that kind already`, {
    remedy: 'Give dump another --output folder.',
  });
}

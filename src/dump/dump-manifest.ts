// manifest.json of a dump folder: what each dump is (type, target, how it was asked for, size, SHA-256, timings).
// Takes the folder and one more entry; gives the manifest with the entry appended, written afresh (a partial file
// renamed over the old one). A folder whose manifest.json is another kind (collect's) or unreadable is refused rather
// than overwritten: dumps go in a folder of their own.
import { ProfcpuError } from '../error.js';
import { formatManifest, toolInfo, type Manifest } from '../bundle/manifest.js';
import { layout } from '../bundle/layout.js';
import type { OutputFolder } from '../files/output-folder.js';
import { outputModes } from '../files/output-folder.js';
import type { DumpTypeName } from '../dotnet/dump-protocol.js';

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

export async function recordDump(folder: OutputFolder, entry: DumpEntry): Promise<DumpManifest> {
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

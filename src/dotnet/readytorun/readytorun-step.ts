// The names of the target's precompiled .NET code, as a collect step: every `.dll` or `.exe` the target maps
// executable (ReadyToRun images are; IL-only ones are not read twice) is read through the target's root (TargetFiles:
// capped, never a link out of the target), its names worked out (readytorun.ts) and written to the folder
// (readytorun-store.ts). Before recording, so a recording cut short by the target's end still has them; after
// recording, for assemblies loaded meanwhile. The report says how many images and methods, and what was skipped.

import { basename, dirname } from 'node:path';
import type { CollectStep, StepContext, StepReport } from '../../step/step.js';
import { OutputFolder } from '../../files/output-folder.js';
import { isExecutable, parseProcMaps } from '../../target/proc-maps.js';
import { readProcText } from '../../target/procfs.js';
import { assemblyMetadata, compositeComponentNames, NotReadyToRunError, readReadyToRunNames } from './readytorun.js';
import {
  readReadyToRunIndex,
  writeReadyToRunIndex,
  writeReadyToRunTable,
  type ReadyToRunImageEntry,
} from './readytorun-store.js';

export interface ReadyToRunStepOptions {
  /** Largest image read. Default 256 MiB (System.Private.CoreLib.dll is about 15 MB). */
  maxImageBytes: number;
  /** Bytes read in one run at most, images' sizes added up. Default 2 GiB. */
  maxTotalBytes: number;
  /** Bytes of composite images' component files read in one run at most (counted in maxTotalBytes too). 512 MiB. */
  maxComponentBytes: number;
  /** Images read in one run at most. Default 1024 (an ASP.NET Core app maps about 60). */
  maxImages: number;
  /** Time the step may take in one pass, ms; what is left is reported skipped. Default 60 s. */
  timeoutMs: number;
}

export const readyToRunStepDefaults: Readonly<ReadyToRunStepOptions> = Object.freeze({
  maxImageBytes: 256 << 20,
  maxTotalBytes: 2 * 1024 ** 3,
  maxComponentBytes: 512 << 20,
  maxImages: 1024,
  timeoutMs: 60_000,
});

const assemblyPattern = /\.(dll|exe)$/i;
/** A component's simple name as a file name may hold it: no separators, no `..`. */
const assemblyName = /^(?!\.\.?$)[^/\0]{1,255}$/;

/** The collect step; see the top of this file. */
export function readyToRunStep(options: Partial<ReadyToRunStepOptions> = {}): CollectStep {
  const opts = { ...readyToRunStepDefaults, ...options };
  // Paths looked at already (named, IL only or refused), so the second pass reads only what was loaded since.
  const seen = new Set<string>();
  // Both passes report into one manifest entry: the totals so far.
  const totals = { images: 0, methods: 0, ilOnly: 0, skipped: [] as { path: string; reason: string }[] };
  let bytesRead = 0;
  let componentBytes = 0;
  const run = async (context: StepContext): Promise<StepReport | undefined> => {
    const files = context.files;
    if (!files) throw new Error('the readytorun step needs the session’s view of the target');
    const text = await readProcText(context.target.pid, 'maps', { procRoot: context.procRoot });
    const paths = new Set<string>();
    for (const m of parseProcMaps(text ?? '').mappings)
      if (isExecutable(m) && m.path.startsWith('/') && assemblyPattern.test(m.path) && !seen.has(m.path))
        paths.add(m.path);
    const wanted = [...paths].sort().slice(0, Math.max(0, opts.maxImages - seen.size));
    if (wanted.length === 0) return report(totals);
    const deadline = Date.now() + opts.timeoutMs;
    // A composite image (`framework-r2r.dll`, `App.r2r.dll`) names its methods with its components' metadata, which
    // is in their own files beside it: read within the same limits and a budget of their own, each name once, and
    // only their metadata kept. One that cannot be read leaves its methods unnamed.
    const readComponents = async (path: string, bytes: Buffer): Promise<Map<string, Buffer>> => {
      const found = new Map<string, Buffer>();
      const tried = new Set<string>();
      for (const name of compositeComponentNames(bytes)) {
        if (context.signal.aborted || Date.now() > deadline) break;
        if (tried.has(name) || !assemblyName.test(name)) continue;
        tried.add(name);
        try {
          const left = Math.min(opts.maxComponentBytes - componentBytes, opts.maxTotalBytes - bytesRead);
          if (left <= 0) break;
          const read = await files.read(`${dirname(path)}/${name}.dll`, Math.min(opts.maxImageBytes, left));
          componentBytes += read.bytes.length;
          bytesRead += read.bytes.length;
          if (!read.truncated) found.set(name, assemblyMetadata(read.bytes));
        } catch {
          // Not there (trimmed away, or not readable), or not an assembly: its methods stay unnamed.
        }
      }
      return found;
    };
    const folder = await OutputFolder.open(context.dir);
    try {
      const index = new Map((await readReadyToRunIndex(folder)).map((e) => [e.path, e] as const));
      const added: ReadyToRunImageEntry[] = [];
      const skipped: { path: string; reason: string }[] = [];
      for (const path of wanted) {
        seen.add(path);
        if (context.signal.aborted) break;
        try {
          if (Date.now() > deadline) throw new Error(`the step's ${opts.timeoutMs / 1000} s are over`);
          const size = (await files.describe(path)).size ?? 0;
          if (size > opts.maxImageBytes) throw new Error(`larger than ${opts.maxImageBytes} bytes`);
          if (bytesRead + size > opts.maxTotalBytes)
            throw new Error(`the ${opts.maxTotalBytes} bytes for one run are read`);
          const read = await files.read(path, opts.maxImageBytes);
          bytesRead += read.bytes.length;
          if (read.truncated) throw new Error(`larger than ${opts.maxImageBytes} bytes`);
          const components = await readComponents(path, read.bytes);
          const names = readReadyToRunNames(read.bytes, {
            fileName: basename(path),
            componentMetadata: (name) => components.get(name),
          });
          const entry = await writeReadyToRunTable(folder, path, names);
          index.set(path, entry);
          added.push(entry);
        } catch (error) {
          if (error instanceof NotReadyToRunError) totals.ilOnly++;
          else skipped.push({ path, reason: error instanceof Error ? error.message : String(error) });
        }
      }
      if (added.length > 0) await writeReadyToRunIndex(folder, [...index.values()]);
      for (const s of skipped) context.warn(`precompiled code of ${s.path} stays unnamed: ${s.reason}`);
      if (added.length > 0)
        context.progress(
          `named the precompiled code of ${added.length} assemblies (${added.reduce((n, e) => n + e.methods, 0)} code blocks)`,
        );
      totals.images += added.length;
      totals.methods += added.reduce((n, e) => n + e.methods, 0);
      totals.skipped.push(...skipped);
      return report(totals);
    } finally {
      await folder.close();
    }
  };
  return { name: 'readytorun', beforeRecording: run, afterRecording: run };
}

/** The totals as the manifest shows them; nothing for a target that maps no assembly (not .NET). */
function report(totals: {
  images: number;
  methods: number;
  ilOnly: number;
  skipped: unknown[];
}): StepReport | undefined {
  const { skipped, ...counts } = totals;
  if (counts.images === 0 && counts.ilOnly === 0 && skipped.length === 0) return undefined;
  return { ...counts, ...(skipped.length > 0 && { skipped: [...skipped] }) };
}

// `profcpu diff BEFORE AFTER`: two profiles in, their comparison out. Each side is an output folder (its
// folded_stacks.out, or the off-CPU or wall-clock view's), a prof.tar.gz (unpacked by the hardened unpacker into a
// temporary folder, then removed) or a folded-stacks file, in any mix. Writes into the output folder diff.svg and
// diff.html (the differential flame graph) and diff.json (the frames that moved most, the totals, what was merged),
// each under a `.partial` name until all are written; gives the comparison for the terminal.
import { mkdtemp, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ProfcpuError } from '../error.js';
import { readPathCapped, type CappedBytes, type ReadLimits } from '../files/bounded-read.js';
import { OutputFolder } from '../files/output-folder.js';
import { layout } from '../output/layout.js';
import { PartialOutputs } from '../output/partial-outputs.js';
import { unpackTarball } from '../output/unpack.js';
import { renderDiffHtml, renderDiffSvg } from '../render/diff.js';
import {
  defaultDiffOptions,
  diffStacks,
  frameChanges,
  type DiffOptions,
  type FrameChange,
  type StackDiff,
} from '../stacks/diff.js';
import { parseFoldedText, type FoldedStacks } from '../stacks/folded.js';

/** Which of an output folder's profiles to compare. */
export type DiffView = 'cpu' | 'offcpu' | 'wall';

export interface DiffRunOptions extends DiffOptions {
  view: DiffView;
  /** Where diff.svg, diff.html and diff.json go (created if missing). */
  output: string;
  /** Frames diff.json lists, the largest moves first. Default 1000. */
  maxFrames: number;
  title?: string;
}

export const diffFiles = Object.freeze({ svg: 'diff.svg', html: 'diff.html', json: 'diff.json' });

/** Largest folded-stacks file read (a 90 s recording of a busy service folds to a few MB). */
const maxFoldedBytes = 512 << 20;

export interface DiffResult {
  diff: StackDiff;
  changes: FrameChange[];
  sources: { before: string; after: string };
  files: Record<string, string>;
}

export async function runDiff(
  beforePath: string,
  afterPath: string,
  options: Partial<DiffRunOptions> & Pick<DiffRunOptions, 'output'>,
): Promise<DiffResult> {
  const o = { ...defaultDiffOptions, view: 'cpu' as DiffView, maxFrames: 1000, ...options };
  const before = await readProfile(beforePath, o.view);
  const after = await readProfile(afterPath, o.view);
  const diff = diffStacks(before.stacks, after.stacks, o);
  const changes = frameChanges(diff);
  const folder = await OutputFolder.open(o.output, { create: true });
  const outputs = new PartialOutputs(folder);
  try {
    const title = o.title === undefined ? {} : { title: o.title };
    const countName = o.view === 'cpu' ? 'samples' : 'µs';
    await outputs.write(diffFiles.svg, renderDiffSvg(diff, { ...title, countName }));
    await outputs.write(diffFiles.html, renderDiffHtml(diff, { ...title, countName }));
    const json = {
      before: { source: before.source, total: diff.totals.before },
      after: { source: after.source, total: diff.totals.after },
      view: o.view,
      unit: countName === 'µs' ? 'microseconds' : 'samples',
      normalized: o.normalize,
      scale: diff.scale,
      merged: diff.merged,
      distinctStacks: diff.stacks.size,
      frames: changes.slice(0, o.maxFrames),
    };
    await outputs.write(diffFiles.json, `${JSON.stringify(json, null, 1)}\n`);
    const files = await outputs.commit();
    return { diff, changes, sources: { before: before.source, after: after.source }, files };
  } finally {
    await outputs.discard();
    await folder.close();
  }
}

const viewFiles: Record<DiffView, string> = {
  cpu: layout.foldedStacks,
  offcpu: layout.offCpuFolded,
  wall: layout.wallClockFolded,
};

/** One side's folded stacks, and where they were read, in words. */
async function readProfile(path: string, view: DiffView): Promise<{ stacks: FoldedStacks; source: string }> {
  const info = await stat(path).catch((cause: unknown) => {
    throw new ProfcpuError('IO', `cannot read ${path}: ${(cause as NodeJS.ErrnoException).code ?? cause}`, {
      remedy: 'Give an output folder, a prof.tar.gz or a folded-stacks file.',
      cause,
    });
  });
  if (info.isDirectory()) return { stacks: await readFromFolder(path, view), source: join(path, viewFiles[view]) };
  if (/\.(tar\.gz|tgz)$/.test(path))
    return { stacks: await readFromTarball(path, view), source: `${path}: ${viewFiles[view]}` };
  // The user's own path: a link in it is followed once, here (the read itself follows none).
  const real = await realpath(path);
  return { stacks: await readFolded((limits) => readPathCapped(real, limits), path), source: path };
}

async function readFromFolder(path: string, view: DiffView): Promise<FoldedStacks> {
  const folder = await OutputFolder.open(path);
  try {
    return await readFolded((limits) => folder.read(viewFiles[view], limits), join(path, viewFiles[view]), view);
  } finally {
    await folder.close();
  }
}

/** A tarball somebody sent: unpacked by the unpacker (its caps, deadline and refusals) into a folder of our own. */
async function readFromTarball(path: string, view: DiffView): Promise<FoldedStacks> {
  const scratch = await mkdtemp(join(tmpdir(), 'profcpu-diff-'));
  try {
    const { dir } = await unpackTarball(path, { into: join(scratch, 'unpacked') });
    return await readFromFolder(dir, view);
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Folded stacks read by `read` (up to the cap, within a deadline: a FIFO would never end), `shown` in messages. */
async function readFolded(
  readBytes: (limits: ReadLimits) => Promise<CappedBytes>,
  shown: string,
  view?: DiffView,
): Promise<FoldedStacks> {
  let read: CappedBytes;
  try {
    read = await readBytes({ maxBytes: maxFoldedBytes, timeoutMs: 60_000 });
  } catch (cause) {
    const why =
      cause instanceof ProfcpuError ? cause.message : ((cause as NodeJS.ErrnoException).code ?? String(cause));
    throw new ProfcpuError('IO', `cannot read ${shown}: ${why}`, {
      remedy:
        view === undefined || view === 'cpu'
          ? 'Give an output folder that was post-processed (`profcpu postprocess -dir D`), its prof.tar.gz, or a folded-stacks file.'
          : `The ${view} view exists only for recordings made with \`profcpu collect --off-cpu\`.`,
      cause,
    });
  }
  if (read.truncated)
    throw new ProfcpuError('IO', `${shown} is larger than ${maxFoldedBytes >> 20} MiB`, {
      remedy: 'Compare folded stacks of a shorter recording.',
    });
  const text = read.bytes.toString('utf8');
  const { stacks } = parseFoldedText(text);
  if (stacks.size === 0)
    throw new ProfcpuError('NO_SAMPLES', `${shown} holds no stack with a positive count`, {
      remedy: 'Give folded stacks (`frame;frame;frame count` lines), as postprocess and `profcpu fold` write them.',
    });
  return stacks;
}

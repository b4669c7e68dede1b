// Which perf to run when several are installed: the sidecar image may hold perf builds from kernel sources as
// `/opt/perf/<version>/perf` next to the distribution's perf. Takes the running kernel's release and the
// candidates; gives the one closest to the kernel and a sentence saying why, for the user and the manifest.
// `findPerfCandidates` is the thin shell that lists what is installed.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { ProfcpuError } from '../error.js';
import type { PerfExecOptions } from './exec.js';
import { defaultPerfPath } from './perf-path.js';
import { kernelRelease, perfVersion } from './version.js';
import { executableOnPath, isExecutableFile } from '../files/executables.js';

export interface PerfCandidate {
  /** The executable, a path or (for the distribution's perf) a name looked up on PATH. */
  path: string;
  /** Its version, `6.6` or `6.12.38`: the folder name under /opt/perf, or what `perf version` printed. */
  version: string;
}

export interface SelectPerfOptions {
  /** The running kernel's release, as `uname -r` prints it (`6.18.44-fc-v669`). */
  kernelRelease: string;
  /** What is installed, in order of preference when two are equally close (the first wins). */
  candidates: readonly PerfCandidate[];
}

export interface PerfSelection {
  path: string;
  version: string;
  /** One sentence for the user: which perf, and why this one. */
  reason: string;
}

export interface FindPerfCandidatesOptions extends Pick<PerfExecOptions, 'signal'> {
  /** Where source-built perfs live, one folder per kernel version. Default `/opt/perf`. */
  root?: string;
  /** The distribution's perf, a path or a name on PATH; left out when it does not run. Default `perf`. */
  distributionPerf?: string;
}

export const findPerfCandidatesDefaults = Object.freeze({
  root: '/opt/perf',
  distributionPerf: defaultPerfPath,
});

type Version = readonly [major: number, minor: number, patch: number];

/** `6.18.44-fc-v669` → [6, 18, 44]; `6.6` → [6, 6, 0]; undefined when it does not start with `<major>.<minor>`. */
export function parseKernelVersion(text: string): Version | undefined {
  const match = /^v?(\d+)\.(\d+)(?:\.(\d+))?/.exec(text.trim());
  if (!match) return undefined;
  return [Number(match[1]), Number(match[2]), match[3] === undefined ? 0 : Number(match[3])];
}

/** Distance between two releases: a minor release apart counts 1, a major release more than any minor distance. */
function distance(a: Version, b: Version): number {
  return Math.abs(a[0] * 1000 + a[1] - (b[0] * 1000 + b[1]));
}

/**
 * Picks the perf closest to the running kernel (by minor release). Equally close candidates: the newer one wins (perf's interface to
 * the kernel is size-versioned, so a newer perf copes with an older kernel better than the reverse), then the
 * earlier in the list. Candidates whose version cannot be read are used only when nothing else is there.
 */
export function selectPerf({ kernelRelease, candidates }: SelectPerfOptions): PerfSelection {
  if (candidates.length === 0)
    throw new ProfcpuError('NO_PERF', 'no perf is installed', {
      remedy: 'Install perf (Debian: apt-get install linux-perf), or use the profcpu sidecar image, which has it.',
    });
  const kernel = parseKernelVersion(kernelRelease);
  const versioned = candidates.flatMap((c, index) => {
    const v = parseKernelVersion(c.version);
    return v ? [{ candidate: c, version: v, index }] : [];
  });
  const listed = candidates.map((c) => `${c.version} (${c.path})`).join(', ');
  if (candidates.length === 1) {
    const only = candidates[0]!;
    return { ...only, reason: `perf ${only.version} at ${only.path}: the only perf installed` };
  }
  if (!kernel || versioned.length === 0) {
    const first = versioned[0]?.candidate ?? candidates[0]!;
    const why = kernel ? 'no candidate has a readable version' : `kernel release "${kernelRelease}" is not a version`;
    return { ...first, reason: `perf ${first.version} at ${first.path}: ${why}, so the first of ${listed}` };
  }
  const best = [...versioned].sort((x, y) => {
    const d = distance(x.version, kernel) - distance(y.version, kernel);
    if (d !== 0) return d;
    for (let i = 0; i < 3; i++) if (x.version[i] !== y.version[i]) return y.version[i]! - x.version[i]!;
    return x.index - y.index;
  })[0]!;
  const exact = best.version[0] === kernel[0] && best.version[1] === kernel[1];
  const how = exact ? 'matches' : 'is the closest to';
  return {
    ...best.candidate,
    reason: `perf ${best.candidate.version} at ${best.candidate.path} ${how} the running kernel ${kernelRelease} (installed: ${listed})`,
  };
}

/** Whether `command` (a path, or a name looked up on PATH, as execa would run it) is an executable file. */
export async function isInstalled(command: string): Promise<boolean> {
  return command.includes('/')
    ? isExecutableFile(command)
    : (await executableOnPath(command, process.env)) !== undefined;
}

/**
 * Lists `<root>/<version>/perf` executables (sorted by version, newest first), then the distribution's perf with the
 * version it reports. A missing root or a distribution perf that does not run is simply not listed.
 */
export async function findPerfCandidates(options: FindPerfCandidatesOptions = {}): Promise<PerfCandidate[]> {
  const { root, distributionPerf } = { ...findPerfCandidatesDefaults, ...options };
  const found: { candidate: PerfCandidate; version: Version }[] = [];
  let names: string[] = [];
  try {
    names = await readdir(root);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw ioError(root, error);
  }
  for (const name of names) {
    const version = parseKernelVersion(name);
    const path = join(root, name, 'perf');
    if (version && (await isExecutableFile(path))) found.push({ candidate: { path, version: name }, version });
  }
  found.sort((a, b) => b.version[0] - a.version[0] || b.version[1] - a.version[1] || b.version[2] - a.version[2]);
  const candidates = found.map((f) => f.candidate);
  try {
    const version = await perfVersion({ perfPath: distributionPerf, signal: options.signal });
    candidates.push({ path: distributionPerf, version });
  } catch (error) {
    if (options.signal?.aborted) throw error;
  }
  return candidates;
}

function ioError(path: string, cause: unknown): ProfcpuError {
  return new ProfcpuError('IO', `cannot list ${path}: ${(cause as Error).message}`, {
    remedy: `Check that ${path} is a readable folder of <kernel version>/perf builds.`,
    cause,
  });
}

/** The perf to run here: the installed one closest to the running kernel (see `selectPerf`), with the reason. */
export async function choosePerf(
  options: FindPerfCandidatesOptions = {},
): Promise<PerfSelection & { candidates: number }> {
  const candidates = await findPerfCandidates(options);
  if (candidates.length === 0) {
    // Nothing runs: keep the plain name, so the preflight check reports perf missing with its remedy.
    const path = options.distributionPerf ?? findPerfCandidatesDefaults.distributionPerf;
    return { path, version: 'unknown', reason: `no perf found; trying ${path}`, candidates: 0 };
  }
  return { ...selectPerf({ kernelRelease: kernelRelease(), candidates }), candidates: candidates.length };
}

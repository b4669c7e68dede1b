// How collect records call chains. `--unwind fp` records frame-pointer chains (perf's -g): cheap, but a sample in code
// built without frame pointers (glibc's, most native libraries') loses its callers. `--unwind mixed` records a copy of
// each sample's stack instead (--call-graph dwarf), which postprocess's built-in engine unwinds by CFI and by frame
// pointer through JIT code: complete stacks, for a perf.data about 100 times bigger, or about 10 times once perf
// compresses it (-z). `auto`, the default, takes mixed where it pays: where the built-in engine unwinds this machine's
// stacks and the copies fit the disk budget below (session.ts also gives way to fp for a target mapping data files
// from a file system that may hang); else fp, saying why.
export type UnwindRequest = 'auto' | 'fp' | 'mixed';

export type UnwindPlan =
  { kind: 'fp'; reason: string } | { kind: 'mixed'; stackBytes: number; compress: boolean; reason: string };

export const unwindBudget = Object.freeze({
  /** perf.data an automatic choice of mixed may expect to write, at most. */
  maxBytes: 512 << 20,
  /** The share of the output folder's free space it may expect to take. */
  freeShare: 0.25,
  /**
   * How much zstd shrinks a recording of stack copies, taken low: 21 to 23 measured on the .NET 8 fixture at 32 KiB
   * (perf's own report), 10 on an ASP.NET Core service with EF Core over SQLite under load (63 MB to 6.4 MB).
   */
  compressionRatio: 8,
  /** A sample's bytes besides its stack copy: header, ids, time, the kernel chain, 17 user registers. */
  sampleOverhead: 1024,
});

export interface UnwindInputs {
  requested: UnwindRequest;
  stackBytes: number;
  durationSeconds: number;
  frequency: number;
  /** CPUs the recording may sample at once (the machine's: a target may use them all). */
  cpus: number;
  /** `process.arch` of the machine perf records on. */
  arch: string;
  /** The perf at hand writes compressed records (-z). */
  perfCompresses: boolean;
  /** Free bytes where the output goes, when known. */
  freeBytes?: number;
}

/** The most perf.data stack copies of a recording may take: every CPU busy for the whole duration. */
export function stackCopyBytes(inputs: UnwindInputs): number {
  const samples = inputs.durationSeconds * inputs.frequency * inputs.cpus;
  const raw = samples * (inputs.stackBytes + unwindBudget.sampleOverhead);
  return Math.ceil(inputs.perfCompresses ? raw / unwindBudget.compressionRatio : raw);
}

const mebibytes = (bytes: number) => `${Math.ceil(bytes / (1 << 20))} MiB`;

/** How to record call chains, and why, in words for the log and the manifest. Pure. */
export function chooseUnwind(inputs: UnwindInputs): UnwindPlan {
  const mixed = (reason: string): UnwindPlan => ({
    kind: 'mixed',
    stackBytes: inputs.stackBytes,
    compress: inputs.perfCompresses,
    reason,
  });
  if (inputs.requested === 'fp') return { kind: 'fp', reason: '--unwind fp' };
  if (inputs.requested === 'mixed') return mixed('--unwind mixed');
  if (inputs.arch !== 'x64')
    return {
      kind: 'fp',
      reason: `the built-in engine unwinds stack copies of x86-64 only, and this machine is ${inputs.arch}`,
    };
  const bytes = stackCopyBytes(inputs);
  const budget = Math.min(
    unwindBudget.maxBytes,
    inputs.freeBytes === undefined ? Infinity : inputs.freeBytes * unwindBudget.freeShare,
  );
  const compressed = inputs.perfCompresses ? ' compressed' : ' (this perf does not compress its records)';
  const estimate =
    `${inputs.durationSeconds} s × ${inputs.frequency} Hz × ${inputs.cpus} CPUs of ${inputs.stackBytes}-byte stack ` +
    `copies: up to ${mebibytes(bytes)}${compressed}`;
  if (bytes > budget)
    return {
      kind: 'fp',
      reason:
        `${estimate}, more than the ${mebibytes(budget)} allowed ` +
        `(${inputs.freeBytes !== undefined && budget < unwindBudget.maxBytes ? 'a quarter of the free space' : 'the cap'}); ` +
        'callers of code built without frame pointers may be lost (--unwind mixed records the copies anyway; ' +
        'a shorter --duration or a smaller --stack-size fits them)',
    };
  return mixed(`${estimate}, within the ${mebibytes(budget)} allowed`);
}

// What a frame is, for palettes and for the naming-quality report.

export type FrameKind =
  /** Managed code compiled at run time, named from perf-PID.map or the jitdump. */
  | 'jit'
  /** Precompiled (ReadyToRun) managed code inside a .dll mapping, named from the jitdump. */
  | 'readytorun'
  /** Native code with a symbol name. */
  | 'native'
  /** Native code in a known file but without a name (missing symbols or debug file). */
  | 'native-unnamed'
  /** Kernel code: a `[kernel.*]` or `vmlinux` dso, or an address in the kernel half. `[vdso]` is native. */
  | 'kernel'
  /** Nothing known: no mapping, no name. */
  | 'unknown';

export const frameKinds: readonly FrameKind[] = ['jit', 'readytorun', 'native', 'native-unnamed', 'kernel', 'unknown'];

/** A frame counts as named unless it is one of these kinds. */
export function isNamed(kind: FrameKind): boolean {
  return kind !== 'native-unnamed' && kind !== 'unknown';
}

/** Managed code: JIT-compiled or precompiled. */
export function isManaged(kind: FrameKind): boolean {
  return kind === 'jit' || kind === 'readytorun';
}

// The names of the files in an output folder (`profilings/HH-MM-SS_YYYY-MM-DD/`), in one place. The first three keep
// the original shell tool's names. Everything collect writes is raw data that `postprocess` can turn into the
// rest again, elsewhere, after the target is gone.

export const layout = Object.freeze({
  /** perf record's output. */
  perfData: 'perf.data',
  /** Snapshots of the target taken while it ran (see below). */
  targetDir: 'target',
  /** Copy of the target's /tmp/perf-<nspid>.map, under its namespace PID: `target/perf-<nspid>.map`. */
  perfMap: (nspid: number) => `target/perf-${nspid}.map`,
  /** Copy of the target's /tmp/jit-<nspid>.dump: `target/jit-<nspid>.dump`. */
  jitDump: (nspid: number) => `target/jit-${nspid}.dump`,
  /** Copy of /proc/<pid>/maps taken during the recording. */
  procMaps: 'target/maps',
  /**
   * Copies of the target's native binaries, by build-id (`target/binaries/<build-id>`): perf script names their
   * frames from these once the target is gone, here or elsewhere.
   */
  binaries: 'target/binaries',
  /** What is in target/binaries: `{ binaries: [{ path, buildId, bytes }] }`. */
  binariesIndex: 'target/binaries.json',
  /**
   * Names of the precompiled (ReadyToRun) code of the .NET assemblies the target mapped, one gzipped table per image
   * by module version id (`target/readytorun/<mvid>.map.gz`), read from the images themselves.
   */
  readyToRunDir: 'target/readytorun',
  /** What is in target/readytorun: `{ images: [{ path, assembly, mvid, file, methods, sections }] }`. */
  readyToRunIndex: 'target/readytorun.json',
  /**
   * The .NET runtime's stubs by kind, read from its memory (src/dotnet/runtime-stubs/runtime-stubs.ts): `{ format, runtime, read,
   * ranges: [[start, end, kind]] }`, addresses as hex strings.
   */
  runtimeStubs: 'target/runtime-stubs.json',
  /** The kernel's code symbols at collect time, when they were readable (src/kernel/kallsyms-step.ts). */
  kallsyms: 'target/kallsyms',
  /** The kernel's vDSO image at collect time (src/kernel/vdso-step.ts). */
  vdso: 'target/vdso',
  /** What collect learnt about the target (TargetSnapshot as JSON). */
  targetInfo: 'target/target.json',
  /**
   * perf script text, FlameScope-ready. In a folder of its own because FlameScope lists every file of the folder it
   * is pointed at.
   */
  perfScript: 'flamescope/perf_script.out',
  foldedStacks: 'folded_stacks.out',
  flamegraphSvg: 'flamegraph.svg',
  flamegraphHtml: 'flamegraph.html',
  speedscope: 'speedscope.json',
  /**
   * The CPU profile in pprof's format, gzipped (src/render/pprof.ts): what Pyroscope, Parca, Google's pprof and
   * Datadog read. The off-CPU and wall-clock views have theirs (offcpu.pb.gz, wallclock.pb.gz).
   */
  pprof: 'profile.pb.gz',
  /**
   * The off-CPU profile of a recording made with `collect --off-cpu` (src/postprocess/offcpu-outputs.ts): folded
   * stacks weighed in microseconds off the CPU, its flame graphs in milliseconds blocked, speedscope in microseconds.
   */
  offCpuFolded: 'offcpu_folded_stacks.out',
  offCpuSvg: 'offcpu.svg',
  offCpuHtml: 'offcpu.html',
  offCpuSpeedscope: 'offcpu_speedscope.json',
  offCpuPprof: 'offcpu.pb.gz',
  /**
   * The wall-clock view of the same recording: per thread, its CPU samples (as the CPU time they stand for), its time
   * blocked and its time waiting for a CPU, in microseconds (milliseconds in the flame graphs): a thread's whole
   * recording adds up.
   */
  wallClockFolded: 'wallclock_folded_stacks.out',
  wallClockSvg: 'wallclock.svg',
  wallClockHtml: 'wallclock.html',
  wallClockSpeedscope: 'wallclock_speedscope.json',
  wallClockPprof: 'wallclock.pb.gz',
  manifest: 'manifest.json',
  tarball: 'prof.tar.gz',
});

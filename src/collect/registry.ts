// The collect steps in one list: which there are, where each runs and in which order, which is also the order of
// their reports under `collect.steps` in manifest.json. Takes the choices the user made (`--perfmap`, `--symbols` and
// the symbol servers); gives the steps.
//
// Three groups, run in this order around the recording:
//   - the target reader's steps, which read the target's files or memory: built in the target reader's child
//     process (target-reader.ts says why), and in the session only for their names;
//   - the kernel's, which read this machine's kallsyms and vdso (the sidecar's are the target's);
//   - the chosen ones: the .NET perf map switched on over diagnostic IPC, debug files fetched by build-id.
import { keptBinariesStep } from '../binaries/kept-binaries.js';
import { symbolsStep, type SymbolsStepOptions } from '../debug-files/symbols-step.js';
import { perfMapStep, type PerfMapStepOptions } from '../dotnet/perfmap/perfmap-step.js';
import { readyToRunStep } from '../dotnet/readytorun/readytorun-step.js';
import { runtimeStubsStep } from '../dotnet/runtime-stubs/runtime-stubs-step.js';
import { kallsymsStep } from '../kernel/kallsyms-step.js';
import { vdsoStep } from '../kernel/vdso-step.js';
import type { CollectStep } from '../step/step.js';

/** The steps that read the target's files or memory: their passes run in the target reader's child. */
export function targetReaderSteps(): CollectStep[] {
  return [keptBinariesStep(), readyToRunStep(), runtimeStubsStep()];
}

/** The steps that keep this machine's kernel symbols and vdso with the recording. */
export function kernelSteps(): CollectStep[] {
  return [kallsymsStep(), vdsoStep()];
}

/** What the user chose for the steps that may be turned off, grouped per concern. */
export interface ChosenStepOptions {
  /** `--perfmap`: the .NET perf map and jitdump switched on over diagnostic IPC. */
  dotnet: PerfMapStepOptions;
  /** `--symbols` and the symbol servers: debug files fetched by build-id. */
  debugFiles: SymbolsStepOptions;
}

/** The steps the user's choices drive, after the others. */
export function chosenSteps(options: ChosenStepOptions): CollectStep[] {
  return [perfMapStep(options.dotnet), symbolsStep(options.debugFiles)];
}

// The perf executable profcpu runs when not told another: its own module, so that code which only names it (the
// built-in engine's defaults) does not load the process-running code of exec.ts (execa, ~20 ms of every start).
export const defaultPerfPath = 'perf';

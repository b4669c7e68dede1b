// Random windows of time as collect --switch-share makes them (src/perf/record.ts, SwitchWindows: 20 to 60 ms each,
// gaps of a random length whose mean gives the share), for folding a whole recording as if it had been windowed
// (OffCpuFoldOptions.simulatedWindows) and checking the estimate against the whole.
export function randomWindows(share: number): { inWindow(timeNs: number): boolean } {
  let windowEnd = -Infinity;
  let nextStart = -Infinity;
  const ms = 1e6;
  return {
    inWindow(timeNs: number): boolean {
      if (nextStart === -Infinity) nextStart = timeNs;
      while (timeNs >= nextStart) {
        windowEnd = nextStart + (20 + Math.random() * 40) * ms;
        nextStart = windowEnd + Math.random() * 2 * 40 * ms * ((1 - share) / share);
      }
      return timeNs < windowEnd;
    },
  };
}

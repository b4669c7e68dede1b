// The demo's CPU-burning workload: a program of its own (not imported by profcpu), run as
// `node --perf-basic-prof dist/collect/demo-workload.js [seconds]`. Its JavaScript functions have distinctive names
// so a flame graph of it proves that JIT frames were named. It stops by itself after `seconds` (default 60) so a
// crashed collector never leaves it burning a core.

const lifetimeSeconds = Number(process.argv[2] ?? 60);
const deadline = Date.now() + (Number.isFinite(lifetimeSeconds) && lifetimeSeconds > 0 ? lifetimeSeconds : 60) * 1000;

function profcpuDemoFibonacci(n: number): number {
  return n < 2 ? n : profcpuDemoFibonacci(n - 1) + profcpuDemoFibonacci(n - 2);
}

function profcpuDemoHashStrings(rounds: number): number {
  let hash = 2166136261;
  for (let r = 0; r < rounds; r++) {
    const text = `profcpu-${r}-${hash}`;
    for (let i = 0; i < text.length; i++) hash = Math.imul(hash ^ text.charCodeAt(i), 16777619) >>> 0;
  }
  return hash;
}

// Named rather than arrow callbacks, so every JavaScript frame in the flame graph has a readable name.
function profcpuDemoScramble(_: unknown, i: number): number {
  return (i * 7919) % 10007;
}

function profcpuDemoCompare(a: number, b: number): number {
  return a - b;
}

function profcpuDemoSortNumbers(count: number): number {
  const values = Array.from({ length: count }, profcpuDemoScramble);
  values.sort(profcpuDemoCompare);
  return values[count >> 1] ?? 0;
}

// Each slice runs for a few milliseconds, then yields to the event loop so signals are handled promptly.
function profcpuDemoBurnSlice(): number {
  return profcpuDemoFibonacci(22) + profcpuDemoHashStrings(2000) + profcpuDemoSortNumbers(20000);
}

let sink = 0;
function tick(): void {
  if (Date.now() >= deadline) return;
  sink ^= profcpuDemoBurnSlice();
  setImmediate(tick);
}

process.on('SIGTERM', () => {
  process.exitCode = sink === -1 ? 1 : 0;
  process.exit();
});
tick();

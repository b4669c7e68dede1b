// The managed methods that lead a profile, from profcpu's folded stacks or from dotnet-trace's speedscope file, in
// one notation so the two can be compared (test/naming/dotnet-trace.test.ts). A method counts once per sample it is
// on (inclusive), whatever its depth; the entry method and its callers (on every sample) are set apart.
// Only samples of the CPU-burning thread running managed code count, picked alike in both:
// - the stack holds the workload's entry method (the other threads wait, and EventPipe samples them too);
// - the thread executes managed code: in perf's, the leaf frame is managed; in EventPipe's, the sample is CPU_TIME
//   (not UNMANAGED_CODE_TIME) and its innermost method is not Thread.PollGC. EventPipe suspends the runtime to take
//   each sample, so it never sees GC work (the runtime is suspended then) and catches threads that are not at a
//   GC-safe point only once they reach one, in PollGC: time spent waiting for the sampler, not CPU.
//
// Names are reduced to `Type::Method` without generic arguments or parameters, since the two tools spell those
// differently: profcpu `System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon]::ToArray_[j]`,
// dotnet-trace `System.Linq!System.Linq.Enumerable+IteratorSelectIterator`2[System.__Canon,System.__Canon].ToArray()`.

/** Inclusive share of each method over the selected samples, and how many samples (or ms) were selected. */
export interface MethodShares {
  shares: Map<string, number>;
  total: number;
  /** The entry method and the methods above it (its callers). */
  outer: Set<string>;
}

/** `Type::Method` with generic arguments (`[...]`) removed. */
function plain(type: string, method: string): string {
  return `${type.replace(/\[[^\]]*\]/g, '')}::${method}`;
}

/** A folded frame of profcpu's, as `Type::Method`, or undefined when it is not a managed method. */
export function profcpuMethod(frame: string): string | undefined {
  const name = frame.replace(/_\[j\]$/, '');
  if (name === frame) return undefined;
  const at = name.lastIndexOf('::');
  return at > 0 ? plain(name.slice(0, at), name.slice(at + 2)) : undefined;
}

/** A speedscope frame of dotnet-trace's (`Module!Namespace.Type.Method(args)`), or undefined for its pseudo frames. */
export function dotnetTraceMethod(frame: string): string | undefined {
  const bang = frame.indexOf('!');
  if (bang <= 0) return undefined;
  const name = frame.slice(bang + 1).replace(/\(.*\)$/, '');
  // The method is what follows the last dot outside brackets; constructors keep theirs (`Type..ctor`).
  const match = /^(.*?)\.(\.c?ctor|[^.[\]]+)$/.exec(name.replace(/\[[^\]]*\]/g, ''));
  return match ? plain(match[1]!, match[2]!) : undefined;
}

function addInclusive(into: Map<string, number>, methods: Iterable<string | undefined>, weight: number): void {
  const seen = new Set<string>();
  for (const method of methods) if (method !== undefined) seen.add(method);
  for (const method of seen) into.set(method, (into.get(method) ?? 0) + weight);
}

function toShares(counts: Map<string, number>, total: number, outer: Set<string>): MethodShares {
  return { shares: new Map([...counts].map(([m, c]) => [m, total > 0 ? c / total : 0])), total, outer };
}

/** Adds the entry and what lies above it on `methods` (root first) to `outer`. */
function addOuter(outer: Set<string>, methods: readonly (string | undefined)[], entry: string): void {
  for (const method of methods.slice(0, methods.indexOf(entry) + 1)) if (method !== undefined) outer.add(method);
}

/** From folded stacks (`root;frame;frame count`), the samples holding `entry` (a `Type::Method`). */
export function foldedShares(folded: string, entry: string): MethodShares {
  const counts = new Map<string, number>();
  const outer = new Set<string>();
  let total = 0;
  for (const line of folded.split('\n')) {
    const space = line.lastIndexOf(' ');
    if (space <= 0) continue;
    const frames = line.slice(0, space).split(';').slice(1);
    const methods = frames.map(profcpuMethod);
    if (!methods.includes(entry) || methods.at(-1) === undefined) continue;
    const count = Number(line.slice(space + 1));
    total += count;
    addInclusive(counts, methods, count);
    addOuter(outer, methods, entry);
  }
  return toShares(counts, total, outer);
}

interface Speedscope {
  shared: { frames: { name: string }[] };
  profiles: { type: string; events?: { type: 'O' | 'C'; frame: number; at: number }[] }[];
}

/**
 * From dotnet-trace's speedscope file (evented profiles, one per thread, times in ms), the time whose stack holds
 * `entry`. EventPipe samples a thread's managed stack about once a millisecond; the converter turns consecutive
 * identical samples into open/close events, so time stands for samples.
 */
export function speedscopeShares(text: string, entry: string): MethodShares {
  const file = JSON.parse(text) as Speedscope;
  const methods = file.shared.frames.map((f) => dotnetTraceMethod(f.name));
  const counts = new Map<string, number>();
  const outer = new Set<string>();
  let total = 0;
  for (const profile of file.profiles) {
    if (profile.type !== 'evented') continue;
    const stack: number[] = [];
    let last: number | undefined;
    for (const event of profile.events ?? []) {
      if (last !== undefined && event.at > last) {
        const onStack = stack.map((f) => methods[f]);
        const top = file.shared.frames[stack.at(-1)!]?.name;
        const innermost = onStack.findLast((m) => m !== undefined);
        if (onStack.includes(entry) && top === 'CPU_TIME' && !innermost?.includes('PollGC')) {
          total += event.at - last;
          addInclusive(counts, onStack, event.at - last);
          addOuter(outer, onStack, entry);
        }
      }
      last = event.at;
      if (event.type === 'O') stack.push(event.frame);
      else if (stack.pop() !== event.frame) throw new Error('speedscope: a close event does not match its open one');
    }
  }
  return toShares(counts, total, outer);
}

/** The `count` methods with the largest shares, below the entry (its callers and itself are on every sample). */
export function leading(shares: MethodShares, count: number): [string, number][] {
  return [...shares.shares]
    .filter(([method]) => !shares.outer.has(method))
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .slice(0, count);
}

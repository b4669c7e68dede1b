// Two profiles' folded stacks compared: each stack's weight before and after, and each frame's share of each
// profile, self and inclusive, with how far it moved (in points of the profile's total). Pure. Two .NET profiles
// differ in noise too, so names are first merged where they differ in what is not a change of code: a JIT tier, an
// argument list, a generic instantiation, an address or stub number, a number ending a thread's name. Each rule can be
// turned off, and what each merged is counted, so the user is told.
import { matchingOpen } from './managed-name.js';
import type { FoldedStacks } from './folded.js';

export interface DiffOptions {
  /**
   * Compare shares: BEFORE's weights scaled by AFTER's total over BEFORE's, so that a profile twice as long does not
   * read as everything doubling (difffolded.pl -n). Default true; false compares raw weights.
   */
  normalize: boolean;
  /** Keep .NET JIT tiers (`[OptimizedTier1]`) apart. Default false: merged. */
  keepTier: boolean;
  /** Keep argument lists of .NET methods apart. Default false: merged. */
  keepArgs: boolean;
  /** Keep generic instantiations apart (`List`1[System.Int32]`, `M<System.__Canon>`). Default false: merged. */
  keepGenerics: boolean;
  /** Keep numbers that end thread names (`worker-3`) and addresses (`0x7f…`, `stub<12>`). Default false: merged. */
  keepNumbers: boolean;
}

export const defaultDiffOptions: Readonly<DiffOptions> = Object.freeze({
  normalize: true,
  keepTier: false,
  keepArgs: false,
  keepGenerics: false,
  keepNumbers: false,
});

/** A stack's weight in each profile; `before` scaled to AFTER's total when normalizing. */
export interface DiffCounts {
  before: number;
  after: number;
}

export type MergeRule = 'tier' | 'args' | 'generics' | 'numbers';

export interface StackDiff {
  /** Stacks with merged names, root first, to their weights. */
  stacks: Map<string, DiffCounts>;
  /** Each profile's total weight, as read (before any scaling). */
  totals: DiffCounts;
  /** Shares compared (BEFORE scaled to AFTER's total), or raw weights. */
  normalized: boolean;
  /** What BEFORE's weights were multiplied by (AFTER's total over BEFORE's when normalizing, else 1). */
  scale: number;
  /** Per rule, the distinct names it changed (so merged with others differing only there), and one example. */
  merged: { rule: MergeRule; names: number; example: string }[];
}

/** One frame's place in both profiles: self and inclusive weights and their shares (percent of each total). */
export interface FrameChange {
  frame: string;
  before: { self: number; inclusive: number; selfShare: number; inclusiveShare: number };
  after: { self: number; inclusive: number; selfShare: number; inclusiveShare: number };
  /** Change of the shares, in points: after − before. */
  selfPoints: number;
  inclusivePoints: number;
}

/** Compares `before` and `after` stack by stack, names merged as `options` say. */
export function diffStacks(before: FoldedStacks, after: FoldedStacks, options: Partial<DiffOptions> = {}): StackDiff {
  const o: DiffOptions = { ...defaultDiffOptions, ...options };
  const namer = new MergedNames(o);
  const totals = { before: total(before), after: total(after) };
  const scale = o.normalize && totals.before > 0 && totals.after > 0 ? totals.after / totals.before : 1;
  const stacks = new Map<string, DiffCounts>();
  const add = (folded: FoldedStacks, side: keyof DiffCounts, factor: number) => {
    for (const [stack, weight] of folded) {
      if (!(weight > 0)) continue;
      const key = namer.stack(stack);
      let counts = stacks.get(key);
      if (!counts) stacks.set(key, (counts = { before: 0, after: 0 }));
      counts[side] += weight * factor;
    }
  };
  add(before, 'before', scale);
  add(after, 'after', 1);
  return { stacks, totals, normalized: o.normalize, scale, merged: namer.report() };
}

/** Every frame's self and inclusive weights in both profiles, the largest moves of inclusive share first. */
export function frameChanges(diff: StackDiff): FrameChange[] {
  const frames = new Map<string, { before: [number, number]; after: [number, number] }>();
  const seen = new Set<string>();
  for (const [stack, counts] of diff.stacks) {
    const parts = stack.split(';');
    seen.clear();
    for (let i = 0; i < parts.length; i++) {
      const frame = parts[i]!;
      let entry = frames.get(frame);
      if (!entry) frames.set(frame, (entry = { before: [0, 0], after: [0, 0] }));
      // A recursive frame counts once per stack in its inclusive weight.
      if (!seen.has(frame)) {
        seen.add(frame);
        entry.before[1] += counts.before;
        entry.after[1] += counts.after;
      }
      if (i === parts.length - 1) {
        entry.before[0] += counts.before;
        entry.after[0] += counts.after;
      }
    }
  }
  // Shares of each profile's own total (BEFORE's weights are scaled: so is its total).
  const beforeTotal = diff.totals.before * diff.scale;
  const afterTotal = diff.totals.after;
  const share = (weight: number, of: number) => (of > 0 ? (100 * weight) / of : 0);
  const changes: FrameChange[] = [];
  for (const [frame, { before, after }] of frames) {
    const b = {
      self: before[0] / diff.scale,
      inclusive: before[1] / diff.scale,
      selfShare: share(before[0], beforeTotal),
      inclusiveShare: share(before[1], beforeTotal),
    };
    const a = {
      self: after[0],
      inclusive: after[1],
      selfShare: share(after[0], afterTotal),
      inclusiveShare: share(after[1], afterTotal),
    };
    changes.push({
      frame,
      before: b,
      after: a,
      selfPoints: a.selfShare - b.selfShare,
      inclusivePoints: a.inclusiveShare - b.inclusiveShare,
    });
  }
  return changes.sort(
    (x, y) =>
      Math.abs(y.inclusivePoints) - Math.abs(x.inclusivePoints) ||
      Math.abs(y.selfPoints) - Math.abs(x.selfPoints) ||
      (x.frame < y.frame ? -1 : x.frame > y.frame ? 1 : 0),
  );
}

function total(stacks: FoldedStacks): number {
  let sum = 0;
  for (const weight of stacks.values()) if (weight > 0) sum += weight;
  return sum;
}

/** Merged spellings of frame names, cached per distinct name, and what each rule changed. */
class MergedNames {
  private readonly frames = new Map<string, string>();
  private readonly roots = new Map<string, string>();
  private readonly changed: Record<MergeRule, { names: number; example: string }> = {
    tier: { names: 0, example: '' },
    args: { names: 0, example: '' },
    generics: { names: 0, example: '' },
    numbers: { names: 0, example: '' },
  };

  constructor(private readonly o: DiffOptions) {}

  stack(stack: string): string {
    const parts = stack.split(';');
    parts[0] = this.root(parts[0]!);
    for (let i = 1; i < parts.length; i++) parts[i] = this.frame(parts[i]!);
    return parts.join(';');
  }

  report(): StackDiff['merged'] {
    return (Object.keys(this.changed) as MergeRule[])
      .filter((rule) => this.changed[rule].names > 0)
      .map((rule) => ({ rule, ...this.changed[rule] }));
  }

  /** The root frame is the thread's name: `worker-3` and `worker-4` are one kind of thread. */
  private root(name: string): string {
    let merged = this.roots.get(name);
    if (merged === undefined) {
      merged = name;
      if (!this.o.keepNumbers) merged = this.apply('numbers', merged, (n) => n.replace(/[_#-]?\d+$/, '') || n);
      this.roots.set(name, merged);
    }
    return merged;
  }

  private frame(frame: string): string {
    const known = this.frames.get(frame);
    if (known !== undefined) return known;
    const managed = frame.endsWith('_[j]');
    let body = managed ? frame.slice(0, -4) : frame;
    if (managed && !this.o.keepTier) body = this.apply('tier', body, (n) => n.replace(tierSuffix, ''));
    if (managed && !this.o.keepArgs) body = this.apply('args', body, withoutArguments);
    if (managed && !this.o.keepGenerics) body = this.apply('generics', body, withoutInstantiations);
    if (!this.o.keepNumbers)
      body = this.apply('numbers', body, (n) => n.replace(hexAddress, '0x…').replace(stubNumber, 'stub<>'));
    const merged = managed ? `${body}_[j]` : body;
    this.frames.set(frame, merged);
    return merged;
  }

  private apply(rule: MergeRule, name: string, change: (name: string) => string): string {
    const changed = change(name);
    if (changed !== name) {
      const entry = this.changed[rule];
      if (entry.names++ === 0) entry.example = `${name} → ${changed}`;
    }
    return changed;
  }
}

/** The tiers .NET writes after a method's name in perf maps and jitdumps. */
const tierSuffix = /\[(?:PreJIT|QuickJitted|Optimized\w*|Instrumented\w*|Tier\w*|MinOpt\w*|OSR)\]$/;
const hexAddress = /0x[0-9a-fA-F]{4,}/g;
const stubNumber = /\bstub<\d+>/g;

/** `Type::Method(int32,class System.String)` → `Type::Method`. */
function withoutArguments(name: string): string {
  if (!name.endsWith(')')) return name;
  const open = matchingOpen(name, name.length - 1);
  return open > 0 ? name.slice(0, open) : name;
}

/**
 * Generic arguments out: a type's after its arity (`` List`1[System.Int32] `` → `` List`1 ``), a method's after its
 * name (`Method<System.__Canon>` → `Method<>`). Compiler-made names (`<Main>$`, `+<StepAsync>d__1`) are left alone:
 * their `<` follows no name character.
 */
function withoutInstantiations(name: string): string {
  let out = '';
  let i = 0;
  while (i < name.length) {
    const c = name[i]!;
    if (c === '[' && /`\d$/.test(out)) {
      const end = closing(name, i, '[', ']');
      if (end < 0) break;
      i = end + 1;
      continue;
    }
    if (c === '<' && /::[\w.]*\w$/.test(out)) {
      const end = closing(name, i, '<', '>');
      if (end < 0) break;
      out += '<>';
      i = end + 1;
      continue;
    }
    out += c;
    i++;
  }
  return i < name.length ? out + name.slice(i) : out;
}

/** The index of the bracket closing the one at `open`, nesting counted; -1 when it is not closed. */
function closing(text: string, open: number, opener: string, closer: string): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    if (text[i] === opener) depth++;
    else if (text[i] === closer && --depth === 0) return i;
  }
  return -1;
}

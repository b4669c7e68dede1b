// Folded stacks to a speedscope file (https://www.speedscope.app, schema in jlfwong/speedscope
// src/lib/file-format-spec.ts): one "sampled" profile whose samples are the distinct stacks, weighted by their
// counts, over a shared frame table. Takes FoldedStacks and SpeedscopeOptions; gives the JSON text. Deterministic:
// stacks sorted by text, frames numbered in order of first appearance.
import type { FoldedStacks } from '../stacks/folded.js';
import { describeFrame } from './frames.js';

/** Units speedscope knows for sample weights. */
export type SpeedscopeUnit = 'none' | 'nanoseconds' | 'microseconds' | 'milliseconds' | 'seconds' | 'bytes';

export interface SpeedscopeOptions {
  /** Name of the profile and of the file, shown in speedscope's title bar; default 'profcpu'. */
  name: string;
  /** What a weight measures; default 'none' (sample counts). */
  unit: SpeedscopeUnit;
}

export const defaultSpeedscopeOptions: Readonly<SpeedscopeOptions> = Object.freeze({
  name: 'profcpu',
  unit: 'none',
});

/** The `$schema` value speedscope looks for to recognise its own format. */
export const speedscopeSchema = 'https://www.speedscope.app/file-format-schema.json';

export interface SpeedscopeFile {
  $schema: typeof speedscopeSchema;
  shared: { frames: { name: string }[] };
  profiles: {
    type: 'sampled';
    name: string;
    unit: SpeedscopeUnit;
    startValue: number;
    endValue: number;
    samples: number[][];
    weights: number[];
  }[];
  name: string;
  activeProfileIndex: number;
  exporter: string;
}

/** Builds the speedscope document as an object. */
export function toSpeedscope(stacks: FoldedStacks, options: Partial<SpeedscopeOptions> = {}): SpeedscopeFile {
  const o: SpeedscopeOptions = { ...defaultSpeedscopeOptions, ...options };
  const keys: string[] = [];
  let total = 0;
  for (const [stack, weight] of stacks) {
    if (!(weight > 0)) continue;
    keys.push(stack);
    total += weight;
  }
  keys.sort();
  const frames: { name: string }[] = [];
  const index = new Map<string, number>();
  const samples: number[][] = [];
  const weights: number[] = [];
  for (const key of keys) {
    const stack = key.split(';');
    const sample = new Array<number>(stack.length);
    for (let i = 0; i < stack.length; i++) {
      const frame = stack[i]!;
      let id = index.get(frame);
      if (id === undefined) {
        id = frames.length;
        index.set(frame, id);
        frames.push({ name: displayName(frame) });
      }
      sample[i] = id;
    }
    samples.push(sample);
    weights.push(stacks.get(key)!);
  }
  return {
    $schema: speedscopeSchema,
    shared: { frames },
    profiles: [{ type: 'sampled', name: o.name, unit: o.unit, startValue: 0, endValue: total, samples, weights }],
    name: o.name,
    activeProfileIndex: 0,
    exporter: 'profcpu',
  };
}

/** Renders `stacks` as speedscope JSON text. */
export function renderSpeedscope(stacks: FoldedStacks, options: Partial<SpeedscopeOptions> = {}): string {
  return `${JSON.stringify(toSpeedscope(stacks, options))}\n`;
}

// speedscope colours by name only, so the annotation would be lost anyway; kernel frames keep a visible mark.
function displayName(frame: string): string {
  const { name, style } = describeFrame(frame);
  return style === 'kernel' ? `${name} [kernel]` : name;
}

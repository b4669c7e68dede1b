// Colours for flame-graph frames. Takes a palette name, a frame's style and name, and a seed; gives an `rgb()`
// colour that depends on nothing else, so the same input always draws the same picture. Browser-safe: the HTML
// viewer bundles it, so the SVG and the HTML agree.
import type { FrameStyle } from './frames.js';

export type PaletteName =
  /** .NET: managed green, native red, kernel orange, inlined aqua, unknown grey (default). */
  | 'dotnet'
  /** Off-CPU time: the kinds of .NET's palette in cool colours, managed aqua, native blue, kernel purple. */
  | 'cool'
  /** flamegraph.pl's default: every frame red to yellow by name. */
  | 'hot'
  /** flamegraph.pl's java palette: `_[j]` green, `_[i]` aqua, `_[k]` orange, `::` yellow, the rest red. */
  | 'java'
  | 'mem'
  | 'io'
  | 'red'
  | 'green'
  | 'blue'
  | 'aqua'
  | 'yellow'
  | 'purple'
  | 'orange';

export const paletteNames: readonly PaletteName[] = Object.freeze([
  'dotnet',
  'cool',
  'hot',
  'java',
  'mem',
  'io',
  'red',
  'green',
  'blue',
  'aqua',
  'yellow',
  'purple',
  'orange',
]);

export function isPaletteName(name: string): name is PaletteName {
  return (paletteNames as readonly string[]).includes(name);
}

/** Fill of frames matched by a search (flamegraph.pl's magenta). */
export const searchColor = 'rgb(230,0,230)';
/** Fill of a block standing for several frames too narrow to draw one by one. */
export const mergedColor = 'rgb(215,215,215)';

/** The SVG background gradient, top to bottom. */
export function backgroundGradient(palette: PaletteName): readonly [string, string] {
  return palette === 'mem' || palette === 'io' ? ['#f8f8f8', '#e8e8e8'] : ['#eeeeee', '#eeeeb0'];
}

type Hue = 'red' | 'green' | 'blue' | 'aqua' | 'yellow' | 'purple' | 'orange' | 'grey';

/** The colour of one frame. */
export function frameColor(palette: PaletteName, style: FrameStyle, name: string, seed: number): string {
  if (style === 'merged') return mergedColor;
  const h = hashName(name, seed);
  const v1 = (h & 0xff) / 255;
  const v2 = ((h >>> 8) & 0xff) / 255;
  const v3 = ((h >>> 16) & 0xff) / 255;
  switch (palette) {
    case 'hot':
      return rgb(205 + 50 * v3, 230 * v1, 55 * v2);
    case 'mem':
      return rgb(0, 190 + 50 * v2, 210 * v1);
    case 'io':
      return rgb(80 + 60 * v1, 80 + 60 * v1, 190 + 55 * v2);
    case 'dotnet':
      return hue(dotnetHues[style], v1);
    case 'cool':
      return hue(coolHues[style], v1);
    case 'java':
      return hue(
        style === 'native' || style === 'unknown' ? (name.includes('::') ? 'yellow' : 'red') : javaHues[style],
        v1,
      );
    case 'red':
    case 'green':
    case 'blue':
    case 'aqua':
    case 'yellow':
    case 'purple':
    case 'orange':
      return hue(palette, v1);
  }
}

const dotnetHues: Readonly<Record<Exclude<FrameStyle, 'merged'>, Hue>> = {
  managed: 'green',
  native: 'red',
  kernel: 'orange',
  inline: 'aqua',
  unknown: 'grey',
};
const coolHues: Readonly<Record<Exclude<FrameStyle, 'merged'>, Hue>> = {
  managed: 'aqua',
  native: 'blue',
  kernel: 'purple',
  inline: 'green',
  unknown: 'grey',
};
const javaHues: Readonly<Record<'managed' | 'kernel' | 'inline', Hue>> = {
  managed: 'green',
  kernel: 'orange',
  inline: 'aqua',
};

/**
 * A differential flame graph's fill: red for a frame that grew, blue for one that shrank, the deeper the larger the
 * change against the largest (`maxAbs`), near white for none (flamegraph.pl's differential colours).
 */
export function diffColor(delta: number, maxAbs: number): string {
  if (!(maxAbs > 0) || delta === 0) return 'rgb(250,250,250)';
  const pale = 210 * (1 - Math.min(1, Math.abs(delta) / maxAbs));
  return delta > 0 ? rgb(255, pale, pale) : rgb(pale, pale, 255);
}

function hue(name: Hue, v: number): string {
  switch (name) {
    case 'red':
      return rgb(200 + 55 * v, 50 + 80 * v, 50 + 80 * v);
    case 'green':
      return rgb(50 + 60 * v, 200 + 55 * v, 50 + 60 * v);
    case 'blue':
      return rgb(80 + 60 * v, 80 + 60 * v, 205 + 50 * v);
    case 'aqua':
      return rgb(50 + 60 * v, 165 + 55 * v, 165 + 55 * v);
    case 'yellow':
      return rgb(175 + 55 * v, 175 + 55 * v, 50 + 20 * v);
    case 'purple':
      return rgb(190 + 65 * v, 80 + 60 * v, 190 + 65 * v);
    case 'orange':
      return rgb(190 + 65 * v, 90 + 65 * v, 0);
    case 'grey':
      return rgb(165 + 45 * v, 165 + 45 * v, 165 + 45 * v);
  }
}

function rgb(r: number, g: number, b: number): string {
  return `rgb(${Math.floor(r)},${Math.floor(g)},${Math.floor(b)})`;
}

/** FNV-1a over the seed and the name's UTF-16 units, then a murmur3 finalizer so every byte depends on all input. */
export function hashName(name: string, seed: number): number {
  let h = (0x811c9dc5 ^ Math.imul(seed | 0, 0x9e3779b1)) >>> 0;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

// Folded stacks to a self-contained interactive SVG flame graph, in the flamegraph.pl tradition. Takes
// FoldedStacks and SvgOptions; gives the SVG text. Deterministic: frames sorted, colours from a seeded hash of the
// name, no timestamps. Every name passes through sanitize, truncate, then escape, so it cannot break the XML or
// reach the script.
import { ProfcpuError } from '../error.js';
import type { FoldedStacks } from '../stacks/folded.js';
import { buildFlameColumns, type FlameColumns } from './flame-layout.js';
import { escapeXml, sanitizeText } from './frames.js';
import { backgroundGradient, isPaletteName, paletteNames, searchColor, type PaletteName } from './palette.js';
import { writeFrames, type RowStyle } from './svg-frames.js';
import { svgScript, svgStyle } from './svg-script.js';
import { TextSink } from './text-sink.js';

export interface SvgOptions {
  /** Title at the top. Default 'Flame Graph'; an inverted graph left at the default says 'Icicle Graph'. */
  title: string;
  /** Second line under the title; default '' (none). */
  subtitle: string;
  /** Image width in pixels; default 1200. */
  width: number;
  /** Height of one frame in pixels; default 16. */
  frameHeight: number;
  /** Frames narrower than this many pixels are merged with narrow neighbours or left out; default 0.1. */
  minWidth: number;
  /** Palette; default 'dotnet' (managed, native, kernel, inlined and unknown frames told apart). */
  colors: PaletteName;
  /** Seed of the colour hash: change it to get other shades for the same names; default 0. */
  seed: number;
  /** Reverse each stack (leaf becomes root), merging callers of the same leaf functions; default false. */
  reverse: boolean;
  /** Draw an icicle graph, root at the top; default false. */
  inverted: boolean;
  /** What the weights count, shown in tooltips; default 'samples'. */
  countName: string;
  /** Word before the hovered frame's name in the details line; default 'Function:'. */
  nameType: string;
  /** Font family; default 'Verdana'. */
  fontFamily: string;
  /** Font size in pixels; default 12. */
  fontSize: number;
  /** Average character width as a fraction of the font size, used to fit labels; default 0.59. */
  fontWidth: number;
}

export const defaultSvgOptions: Readonly<SvgOptions> = Object.freeze({
  title: 'Flame Graph',
  subtitle: '',
  width: 1200,
  frameHeight: 16,
  minWidth: 0.1,
  colors: 'dotnet',
  seed: 0,
  reverse: false,
  inverted: false,
  countName: 'samples',
  nameType: 'Function:',
  fontFamily: 'Verdana',
  fontSize: 12,
  fontWidth: 0.59,
});

const xpad = 10;
const framePad = 1;

/**
 * Renders `stacks` as an SVG document. An empty profile gives a small SVG saying so. `styleRows`, given the laid-out
 * rows, may colour and describe each row itself (a differential flame graph).
 */
export function renderSvg(
  stacks: FoldedStacks,
  options: Partial<SvgOptions> = {},
  styleRows?: (columns: FlameColumns) => RowStyle,
): string {
  const o: SvgOptions = { ...defaultSvgOptions, ...options };
  if (options.title === undefined && o.inverted) o.title = 'Icicle Graph';
  check(o.width > 2 * xpad, `width must be more than ${2 * xpad} px, not ${o.width}`);
  check(o.frameHeight > framePad, `frameHeight must be more than ${framePad} px, not ${o.frameHeight}`);
  check(o.minWidth >= 0, `minWidth must be 0 or more, not ${o.minWidth}`);
  check(o.fontSize > 0 && o.fontWidth > 0, `fontSize and fontWidth must be positive`);
  check(isPaletteName(o.colors), `unknown palette "${o.colors}" (known: ${paletteNames.join(', ')})`);
  let total = 0;
  for (const weight of stacks.values()) if (weight > 0) total += weight;
  const plotWidth = o.width - 2 * xpad;
  const perSample = total > 0 ? plotWidth / total : 0;
  const layout = buildFlameColumns(stacks, {
    reverse: o.reverse,
    minWeight: perSample > 0 ? o.minWidth / perSample : 0,
  });

  const top = o.fontSize * 3 + (o.subtitle ? o.fontSize * 2 : 0);
  const bottom = o.fontSize * 2 + 10;
  const height = (layout.maxDepth + 1) * o.frameHeight + top + bottom;
  const textDrop = o.frameHeight / 2 + o.fontSize / 3;
  const out = new TextSink(layout.count * 260);
  out.append(header(o, height));

  if (total === 0) {
    out.append(
      `<text x="${o.width / 2}" y="${top + o.fontSize}" text-anchor="middle">No samples: the input has no stack with a positive count.</text>\n</svg>\n`,
    );
    return out.toString();
  }

  out.append(`<g id="frames">\n`);
  writeFrames(out, layout, {
    total,
    perSample,
    xpad,
    y: (depth) => framePad + (o.inverted ? top + depth * o.frameHeight : height - bottom - (depth + 1) * o.frameHeight),
    textDrop,
    rectHeight: o.frameHeight - framePad,
    charWidth: o.fontSize * o.fontWidth,
    colors: o.colors,
    seed: o.seed,
    minWidth: o.minWidth,
    countName: ` ${escapeXml(sanitizeText(o.countName))}, `,
    ...(styleRows && { rowStyle: styleRows(layout) }),
  });
  out.append(`</g>\n`);
  out.append(
    `<script type="text/ecmascript"><![CDATA[${svgScript({
      width: o.width,
      xpad,
      total,
      fontSize: o.fontSize,
      fontWidth: o.fontWidth,
      searchColor,
      nameType: sanitizeText(o.nameType),
    })}]]></script>\n</svg>\n`,
  );
  return out.toString();
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new ProfcpuError('USAGE', `SVG flame graph: ${message}`, { remedy: 'Fix the render options.' });
}

function header(o: SvgOptions, height: number): string {
  const [from, to] = backgroundGradient(o.colors);
  const text = (s: string) => escapeXml(sanitizeText(s));
  const lines = [
    `<?xml version="1.0" encoding="UTF-8" standalone="no"?>`,
    `<svg version="1.1" xmlns="http://www.w3.org/2000/svg" xmlns:fg="urn:profcpu:flamegraph" width="${o.width}" height="${height}" viewBox="0 0 ${o.width} ${height}" font-family="${text(o.fontFamily)}" font-size="${o.fontSize}">`,
    `<defs><linearGradient id="background" y1="0" y2="1" x1="0" x2="0"><stop stop-color="${from}" offset="5%"/><stop stop-color="${to}" offset="95%"/></linearGradient></defs>`,
    `<style type="text/css"><![CDATA[${svgStyle}]]></style>`,
    `<rect x="0" y="0" width="${o.width}" height="${height}" fill="url(#background)"/>`,
    `<text x="${o.width / 2}" y="${o.fontSize * 2}" font-size="${o.fontSize + 5}" text-anchor="middle">${text(o.title)}</text>`,
  ];
  if (o.subtitle)
    lines.push(
      `<text x="${o.width / 2}" y="${o.fontSize * 4}" text-anchor="middle" fill="#a0a0a0">${text(o.subtitle)}</text>`,
    );
  lines.push(
    `<text id="details" x="${xpad}" y="${height - (o.fontSize + 10) / 2}"> </text>`,
    `<text id="unzoom" class="button hide" x="${xpad}" y="${o.fontSize * 2}">Reset Zoom</text>`,
    `<text id="search" class="button" x="${o.width - xpad}" y="${o.fontSize * 2}" text-anchor="end">Search</text>`,
    `<text id="matched" x="${o.width - xpad}" y="${height - (o.fontSize + 10) / 2}" text-anchor="end"> </text>`,
  );
  return `${lines.join('\n')}\n`;
}

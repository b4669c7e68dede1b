// Folded stacks to a self-contained interactive SVG flame graph, in the flamegraph.pl tradition. Takes
// FoldedStacks and SvgOptions; gives the SVG text. Deterministic: frames sorted, colours from a seeded hash of the
// name, no timestamps. Every name passes through sanitize, truncate, then escape, so it cannot break the XML or
// reach the script.
import { ProfcpuError } from '../error.js';
import type { FoldedStacks } from '../stacks/folded.js';
import { buildFlameTree, walkFlameTree, type FlameNode } from './flame-layout.js';
import { describeFrame, escapeXml, sanitizeText, truncateText } from './frames.js';
import {
  backgroundGradient,
  frameColor,
  isPaletteName,
  mergedColor,
  paletteNames,
  searchColor,
  type PaletteName,
} from './palette.js';
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

/** Longest name kept in a tooltip, in UTF-16 units; longer names are cut (labels are cut to fit anyway). */
const maxTitleLength = 2000;
const xpad = 10;
const framePad = 1;

/** Renders `stacks` as an SVG document. An empty profile gives a small SVG saying so. */
export function renderSvg(stacks: FoldedStacks, options: Partial<SvgOptions> = {}): string {
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
  const layout = buildFlameTree(stacks, { reverse: o.reverse, minWeight: perSample > 0 ? o.minWidth / perSample : 0 });

  const top = o.fontSize * 3 + (o.subtitle ? o.fontSize * 2 : 0);
  const bottom = o.fontSize * 2 + 10;
  const height = (layout.maxDepth + 1) * o.frameHeight + top + bottom;
  const textDrop = o.frameHeight / 2 + o.fontSize / 3;
  const out = new TextSink(layout.nodeCount * 260);
  out.append(header(o, height));

  if (total === 0) {
    out.append(
      `<text x="${o.width / 2}" y="${top + o.fontSize}" text-anchor="middle">No samples: the input has no stack with a positive count.</text>\n</svg>\n`,
    );
    return out.toString();
  }

  out.append(`<g id="frames">\n`);
  const charWidth = o.fontSize * o.fontWidth;
  const countName = ` ${escapeXml(sanitizeText(o.countName))}, `;
  const rectHeight = o.frameHeight - framePad;
  // A frame name recurs in many stacks: prepare its text and colour once per render.
  const looks = new Map<string, Look>();
  walkFlameTree(layout.root, (frame) => {
    const x = xpad + frame.start * perSample;
    const w = frame.weight * perSample;
    const y =
      framePad + (o.inverted ? top + frame.depth * o.frameHeight : height - bottom - (frame.depth + 1) * o.frameHeight);
    let look = frame.kind === 'frame' ? looks.get(frame.frame) : undefined;
    if (!look) {
      look = present(frame, o);
      if (frame.kind === 'frame') looks.set(frame.frame, look);
    }
    const label = truncateText(look.name, Math.floor(w / charWidth));
    out.append(
      `<g fg:x="${frame.start}" fg:w="${frame.weight}" fg:d="${frame.depth}"><title>${look.title} (${formatCount(frame.weight)}${countName}${percent(frame.weight, total)}%)</title><rect x="${fixed(x)}" y="${y}" width="${fixed(w)}" height="${rectHeight}" fill="${look.fill}" rx="2" ry="2"/><text x="${fixed(x + 3)}" y="${y + textDrop}">${label === look.name ? look.escaped : escapeXml(label)}</text></g>\n`,
    );
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

interface Look {
  /** Sanitized, not escaped. */
  name: string;
  /** `name` escaped. */
  escaped: string;
  /** `name` cut for tooltips, escaped. */
  title: string;
  fill: string;
}

function present(frame: FlameNode, o: SvgOptions): Look {
  let name: string;
  let fill: string;
  if (frame.kind === 'root') {
    name = 'all';
    fill = frameColor(o.colors, 'native', name, o.seed);
  } else if (frame.kind === 'merged') {
    name = `[${frame.merged} frames, each narrower than ${o.minWidth} px]`;
    fill = mergedColor;
  } else {
    const described = describeFrame(frame.frame);
    name = sanitizeText(described.name);
    fill = frameColor(o.colors, described.style, name, o.seed);
  }
  const escaped = escapeXml(name);
  const title = name.length > maxTitleLength ? escapeXml(truncateText(name, maxTitleLength)) : escaped;
  return { name, escaped, title, fill };
}

/** `n` (not negative) to two decimals, trailing zeros dropped: like String(Math.round(n * 100) / 100), but through
 * integers, which V8 prints several times faster than fractions (this runs three times per frame). */
function fixed(n: number): string {
  const hundredths = Math.round(n * 100);
  const whole = Math.floor(hundredths / 100);
  const fraction = hundredths - whole * 100;
  if (fraction === 0) return `${whole}`;
  if (fraction % 10 === 0) return `${whole}.${fraction / 10}`;
  return fraction < 10 ? `${whole}.0${fraction}` : `${whole}.${fraction}`;
}

function percent(part: number, total: number): string {
  return ((100 * part) / total).toFixed(2);
}

/** `1234567` as `1,234,567`; fractional weights keep three decimals. */
export function formatCount(n: number): string {
  if (n < 1000 && Number.isInteger(n)) return String(n);
  const [whole, fraction] = (Number.isInteger(n) ? String(n) : n.toFixed(3)).split('.');
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return fraction ? `${grouped}.${fraction.replace(/0+$/, '') || '0'}` : grouped;
}

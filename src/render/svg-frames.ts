// The frames of an SVG flame graph: one `<g>` per drawn frame (tooltip, rectangle, label), written into a TextSink.
// Takes the laid-out tree, the graph's geometry and palette; gives the bytes. What recurs is prepared once per
// render and copied: per frame name its escaped tooltip, label and colour (a name recurs in many stacks), per weight
// the width and tooltip figures, per depth the vertical place. Every name passes through sanitize, truncate, then
// escape, so it cannot break the XML or reach the script.
import { frameRow, mergedRow, rootRow, type FlameColumns } from './flame-layout.js';
import { describeFrame, escapeXml, sanitizeText, truncateText } from './frames.js';
import { frameColor, mergedColor, type PaletteName } from './palette.js';
import { encodeText, fixedText, maxNumberBytes, type EncodedText, type TextSink } from './text-sink.js';

export interface FrameLayout {
  /** Sum of all weights: the root's width. */
  total: number;
  /** Pixels per unit of weight. */
  perSample: number;
  /** Left margin in pixels. */
  xpad: number;
  /** `y` of depth `d`'s rectangle. */
  y: (depth: number) => number;
  /** From a rectangle's `y` to its label's baseline. */
  textDrop: number;
  rectHeight: number;
  /** Average character width in pixels, to cut labels to fit. */
  charWidth: number;
  colors: PaletteName;
  seed: number;
  /** The merging threshold in pixels, named in merged blocks' tooltips. */
  minWidth: number;
  /** What the weights count, with its spaces and comma: ` samples, `; sanitized and escaped. */
  countName: string;
  /** Per-row fill and tooltip figures, replacing the palette's and the weight's (a differential graph's). */
  rowStyle?: RowStyle;
}

/** A row's own fill, and the text in its tooltip's parentheses (not escaped); undefined keeps the default. */
export interface RowStyle {
  fill(row: number): string | undefined;
  figures(row: number): string | undefined;
}

/** Longest name kept in a tooltip, in UTF-16 units; longer names are cut (labels are cut to fit anyway). */
const maxTitleLength = 2000;

/** Writes a `<g>` for every row of `tree`, parents before children. */
export function writeFrames(out: TextSink, tree: FlameColumns, layout: FrameLayout): void {
  const looks: (Look | undefined)[] = [];
  const weights = new Map<number, WeightText>();
  const depths: DepthText[] = [];
  for (let depth = 0; depth <= tree.maxDepth; depth++) depths.push(depthText(depth, layout));
  for (let row = 0; row < tree.count; row++) {
    const kind = tree.kind[row]!;
    const start = tree.start[row]!;
    const frameWeight = tree.weight[row]!;
    let look: Look | undefined;
    if (kind === frameRow) {
      const name = tree.name[row]!;
      look = looks[name];
      if (!look) {
        look = present(kind, tree.names[name]!, 1, layout);
        looks[name] = look;
      }
    } else look = present(kind, '', tree.merged[row]!, layout);
    let weight = weights.get(frameWeight);
    if (!weight) {
      weight = weightText(frameWeight, layout);
      weights.set(frameWeight, weight);
    }
    if (layout.rowStyle && kind === frameRow) [look, weight] = restyled(row, look, weight, layout.rowStyle);
    const depth = depths[tree.depth[row]!]!;
    const x = layout.xpad + start * layout.perSample;
    out.reserve(look.bytes + weight.bytes + depth.bytes + 4 * maxNumberBytes + groupOpen.length + groupClose.length);
    // <g fg:x="…" fg:w="…" fg:d="…"><title>… (…)</title><rect x="…" y="…" width="…" height="…" fill="…" rx="2"
    // ry="2"/><text x="…" y="…">…</text></g>
    out.piece(groupOpen);
    out.number(start);
    out.piece(weight.attributes);
    out.piece(depth.attribute);
    out.piece(look.title);
    out.piece(weight.tooltip);
    out.fixed(x);
    out.piece(depth.rect);
    out.piece(weight.width);
    out.piece(look.fill);
    out.fixed(x + 3);
    out.piece(depth.text);
    writeLabel(out, look, weight.maxChars);
    out.piece(groupClose);
  }
}

/** The look and weight texts of a row with a style of its own. */
function restyled(row: number, look: Look, weight: WeightText, style: RowStyle): [Look, WeightText] {
  const fill = style.fill(row);
  const figures = style.figures(row);
  if (fill !== undefined) {
    const text = encodeText(`${fill}" rx="2" ry="2"/><text x="`);
    look = { ...look, fill: text, bytes: look.bytes - look.fill.length + text.length };
  }
  if (figures !== undefined) {
    const text = encodeText(` (${escapeXml(sanitizeText(figures))})</title><rect x="`);
    weight = { ...weight, tooltip: text, bytes: weight.bytes - weight.tooltip.length + text.length };
  }
  return [look, weight];
}

const groupOpen = encodeText('<g fg:x="');
const groupClose = encodeText('</text></g>\n');
const ellipsis = encodeText('..');

/** The name, cut to `maxChars` as truncateText does, escaped. */
function writeLabel(out: TextSink, look: Look, maxChars: number): void {
  if (look.name.length <= maxChars) out.piece(look.label);
  else if (maxChars < 3) return;
  else if (look.plain) {
    out.prefix(look.label, maxChars - 2);
    out.piece(ellipsis);
  } else out.append(escapeXml(truncateText(look.name, maxChars)));
}

interface Look {
  /** Sanitized, not escaped. */
  name: string;
  /** ASCII without markup characters: escaped, it is itself, a byte per character. */
  plain: boolean;
  /** `name` escaped. */
  label: EncodedText;
  /** `name` cut for tooltips, escaped. */
  title: EncodedText;
  /** The colour, then what follows up to the label's `x`. */
  fill: EncodedText;
  /** All of the above. */
  bytes: number;
}

/** How a row of `kind` looks: `frame` is its text (frames only), `merged` how many frames it stands for. */
function present(kind: number, frame: string, merged: number, layout: FrameLayout): Look {
  let name: string;
  let fill: string;
  if (kind === rootRow) {
    name = 'all';
    fill = frameColor(layout.colors, 'native', name, layout.seed);
  } else if (kind === mergedRow) {
    name = `[${merged} frames, each narrower than ${layout.minWidth} px]`;
    fill = mergedColor;
  } else {
    const described = describeFrame(frame);
    name = sanitizeText(described.name);
    fill = frameColor(layout.colors, described.style, name, layout.seed);
  }
  const escaped = escapeXml(name);
  const label = encodeText(escaped);
  const title = name.length > maxTitleLength ? encodeText(escapeXml(truncateText(name, maxTitleLength))) : label;
  const fillText = encodeText(`${fill}" rx="2" ry="2"/><text x="`);
  const plain = escaped === name && label.length === name.length;
  return { name, plain, label, title, fill: fillText, bytes: label.length + title.length + fillText.length };
}

/** What a frame's weight decides. */
interface WeightText {
  /** `" fg:w="…" fg:d="` */
  attributes: EncodedText;
  /** ` (1,234 samples, 5.67%)</title><rect x="` */
  tooltip: EncodedText;
  /** `…" height="…" fill="` */
  width: EncodedText;
  /** Longest label that fits the width. */
  maxChars: number;
  bytes: number;
}

function weightText(weight: number, layout: FrameLayout): WeightText {
  const width = weight * layout.perSample;
  const attributes = encodeText(`" fg:w="${weight}" fg:d="`);
  const tooltip = encodeText(
    ` (${formatCount(weight)}${layout.countName}${((100 * weight) / layout.total).toFixed(2)}%)</title><rect x="`,
  );
  const widthText = encodeText(`${fixedText(width)}" height="${layout.rectHeight}" fill="`);
  return {
    attributes,
    tooltip,
    width: widthText,
    maxChars: Math.floor(width / layout.charWidth),
    bytes: attributes.length + tooltip.length + widthText.length,
  };
}

/** What a frame's depth decides. */
interface DepthText {
  /** `…"><title>` */
  attribute: EncodedText;
  /** `" y="…" width="` */
  rect: EncodedText;
  /** `" y="…">` */
  text: EncodedText;
  bytes: number;
}

function depthText(depth: number, layout: FrameLayout): DepthText {
  const y = layout.y(depth);
  const attribute = encodeText(`${depth}"><title>`);
  const rect = encodeText(`" y="${y}" width="`);
  const text = encodeText(`" y="${y + layout.textDrop}">`);
  return { attribute, rect, text, bytes: attribute.length + rect.length + text.length };
}

/** `1234567` as `1,234,567`; fractional weights keep three decimals. */
export function formatCount(n: number): string {
  if (n < 1000 && Number.isInteger(n)) return String(n);
  const [whole, fraction] = (Number.isInteger(n) ? String(n) : n.toFixed(3)).split('.');
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return fraction ? `${grouped}.${fraction.replace(/0+$/, '') || '0'}` : grouped;
}

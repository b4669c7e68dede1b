// Folded stacks to a single offline HTML page drawing a d3-flame-graph. Takes FoldedStacks and HtmlOptions; gives
// the page's text, with the viewer bundle (assets/viewer.js and .css, built by `npm run build`) inlined and the
// tree embedded as JSON in which `<`, `>`, `&`, U+2028 and U+2029 are escaped, so no name can close the element.
import { readFileSync } from 'node:fs';
import { ProfcpuError } from '../error.js';
import type { FoldedStacks } from '../stacks/folded.js';
import { escapeXml, jsonForScript, sanitizeText } from './frames.js';
import { buildFlameColumns, type FlameColumns } from './flame-layout.js';
import { isPaletteName, paletteNames, type PaletteName } from './palette.js';
import { TextSink } from './text-sink.js';
import { writeViewerTree } from './viewer-tree.js';

export interface HtmlOptions {
  /** Page and graph title. Default 'Flame Graph'; an inverted graph left at the default says 'Icicle Graph'. */
  title: string;
  /** Line under the title; default '' (none). */
  subtitle: string;
  /** Graph width in pixels; default 0, the width of the window when the page opens. */
  width: number;
  /** Height of one frame in pixels; default 18 (d3-flame-graph's). */
  frameHeight: number;
  /**
   * Frames narrower than this many pixels are not drawn until a zoom widens them; default 0.5. Sub-pixel slivers are
   * most of a big profile's frames: 40 000 stacks drew 77 000 frames at 0.1 px (4.9 s to open in Chromium), 10 900 at
   * 0.5 px (1.2 s); searches still count them all.
   */
  minFrameSize: number;
  /**
   * Frames lighter than this fraction of the total are merged with light neighbours or left out of the page, which
   * keeps big profiles quick to open (at 5e-5 they are 0.06 px wide at 1200 px); default 5e-5, 0 keeps all.
   */
  minFraction: number;
  /** Palette, as for the SVG; default 'dotnet'. */
  colors: PaletteName;
  /** Seed of the colour hash; default 0. */
  seed: number;
  /** Reverse each stack (leaf becomes root); default false. */
  reverse: boolean;
  /** Icicle graph, root at the top; default false. */
  inverted: boolean;
  /** What the weights count, shown in tooltips; default 'samples'. */
  countName: string;
  /** The viewer bundle; default read from the package's assets/ folder. */
  viewer: ViewerAssets | undefined;
}

export interface ViewerAssets {
  script: string;
  css: string;
}

export const defaultHtmlOptions: Readonly<HtmlOptions> = Object.freeze({
  title: 'Flame Graph',
  subtitle: '',
  width: 0,
  frameHeight: 18,
  minFrameSize: 0.5,
  minFraction: 5e-5,
  colors: 'dotnet',
  seed: 0,
  reverse: false,
  inverted: false,
  countName: 'samples',
  viewer: undefined,
});

/** Reads the viewer bundle built by `npm run build` (scripts/build-viewer.mjs). */
export function loadViewerAssets(directory: URL = new URL('../../assets/', import.meta.url)): ViewerAssets {
  try {
    return {
      script: readFileSync(new URL('viewer.js', directory), 'utf8'),
      css: readFileSync(new URL('viewer.css', directory), 'utf8'),
    };
  } catch (cause) {
    throw new ProfcpuError('IO', `the HTML viewer bundle is missing from ${directory.pathname}`, {
      remedy: 'Run `npm run build` in the profcpu checkout (it writes assets/viewer.js), or render --format svg.',
      cause,
    });
  }
}

const pageStyle = `body{margin:0 16px;font-family:Verdana,sans-serif;font-size:13px;background:#fafafa}
h1{font-size:20px;font-weight:normal;margin:12px 0 4px}.subtitle{color:#777;margin:0 0 8px}
.controls{display:flex;gap:8px;align-items:center;margin:8px 0}#term{width:24em}#matched{margin-left:auto}
#details{min-height:1.5em;margin:4px 0;white-space:pre;overflow:hidden;text-overflow:ellipsis}`;

/** What a differential page adds: its viewer options, and each row's extra JSON members (see writeViewerTree). */
export interface HtmlRows {
  options: Record<string, unknown>;
  extra: (row: number) => string;
}

/**
 * Renders `stacks` as a self-contained HTML page. `diffRows`, given the laid-out rows, makes it a differential page:
 * its options go to the viewer as `diff`, its members into each node.
 */
export function renderHtml(
  stacks: FoldedStacks,
  options: Partial<HtmlOptions> = {},
  diffRows?: (columns: FlameColumns) => HtmlRows,
): string {
  const o: HtmlOptions = { ...defaultHtmlOptions, ...options };
  if (options.title === undefined && o.inverted) o.title = 'Icicle Graph';
  if (!isPaletteName(o.colors) || !(o.frameHeight > 0) || !(o.minFrameSize >= 0) || !(o.minFraction >= 0))
    throw new ProfcpuError(
      'USAGE',
      'HTML flame graph: invalid options (palette, frameHeight, minFrameSize, minFraction)',
      {
        remedy: `Use a known palette (${paletteNames.join(', ')}), a positive frame height and sizes of 0 or more.`,
      },
    );
  const viewer = o.viewer ?? loadViewerAssets();
  let total = 0;
  for (const weight of stacks.values()) if (weight > 0) total += weight;
  const tree = buildFlameColumns(stacks, { reverse: o.reverse, minWeight: total * o.minFraction });
  const diff = diffRows?.(tree);
  const viewerOptions = {
    ...(diff && { diff: diff.options }),
    width: o.width,
    frameHeight: o.frameHeight,
    minFrameSize: o.minFrameSize,
    colors: o.colors,
    seed: o.seed,
    inverted: o.inverted,
    countName: sanitizeText(o.countName),
  };
  const title = escapeXml(sanitizeText(o.title));
  const subtitle = o.subtitle ? `<p class="subtitle">${escapeXml(sanitizeText(o.subtitle))}</p>\n` : '';
  const out = new TextSink(tree.count * 140 + viewer.script.length + viewer.css.length);
  out.append(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title}</title>
<style>${viewer.css}
${pageStyle}</style>
</head>
<body>
<h1>${title}</h1>
${subtitle}<div class="controls"><input id="term" type="search" placeholder="Search (regular expression), Ctrl-F" aria-label="Search"><button id="clear-search" type="button">Clear</button><button id="reset-zoom" type="button">Reset zoom</button><span id="matched"></span></div>
<div id="chart"></div>
<p id="details"></p>
<script id="profcpu-data" type="application/json">{"options":${jsonForScript(viewerOptions)},"tree":`);
  // The tree, the bulk of the page, is written as JSON directly rather than built as objects and stringified.
  writeViewerTree(out, tree, diff?.extra);
  out.append(`}</script>
<script>${viewer.script}</script>
</body>
</html>
`);
  return out.toString();
}

// The render stage: folded stacks to bytes. Takes FoldedStacks; gives an SVG flame graph, an offline HTML page
// (d3-flame-graph) or a speedscope file, each deterministic. `render` picks one by format name.
import type { FoldedStacks } from '../stacks/folded.js';
import { renderHtml, type HtmlOptions } from './html.js';
import { renderSpeedscope, type SpeedscopeOptions } from './speedscope.js';
import { renderSvg, type SvgOptions } from './svg.js';

export { describeFrame, type DisplayFrame, type FrameStyle } from './frames.js';
export { defaultHtmlOptions, loadViewerAssets, renderHtml, type HtmlOptions, type ViewerAssets } from './html.js';
export { isPaletteName, paletteNames, type PaletteName } from './palette.js';
export {
  defaultSpeedscopeOptions,
  renderSpeedscope,
  speedscopeSchema,
  toSpeedscope,
  type SpeedscopeFile,
  type SpeedscopeOptions,
  type SpeedscopeUnit,
} from './speedscope.js';
export { defaultSvgOptions, renderSvg, type SvgOptions } from './svg.js';

export type RenderFormat = 'svg' | 'html' | 'speedscope';

export const renderFormats: readonly RenderFormat[] = Object.freeze(['svg', 'html', 'speedscope']);

/** Options for any format: each renderer reads the fields it knows. */
export type RenderOptions = Partial<SvgOptions> & Partial<HtmlOptions> & Partial<SpeedscopeOptions>;

/** Renders `stacks` in `format`. */
export function render(format: RenderFormat, stacks: FoldedStacks, options: RenderOptions = {}): string {
  switch (format) {
    case 'svg':
      return renderSvg(stacks, options);
    case 'html':
      return renderHtml(stacks, options);
    case 'speedscope':
      return renderSpeedscope(stacks, options);
  }
}

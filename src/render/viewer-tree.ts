// The call tree the HTML viewer (d3-flame-graph) draws. Takes a FlameTree; gives nested nodes in
// d3-flame-graph's compact form: `n` name (annotation removed, sanitized), `v` total weight, `c` children in
// the order of the sorted folded text, `l` style code (omitted for native frames, to keep the page small).
import type { FlameNode } from './flame-layout.js';
import { describeFrame, sanitizeText, styleCodes } from './frames.js';

export interface ViewerNode {
  n: string;
  v: number;
  l?: string;
  c?: ViewerNode[];
}

/** Converts the tree; the root is named `all`, merged blocks `[N frames]`. */
export function toViewerTree(node: FlameNode): ViewerNode {
  const out: ViewerNode = { n: 'all', v: node.weight };
  if (node.kind === 'frame') {
    const { name, style } = describeFrame(node.frame);
    out.n = sanitizeText(name);
    if (style !== 'native') out.l = styleCodes[style];
  } else if (node.kind === 'merged') {
    out.n = `[${node.merged} frames]`;
    out.l = styleCodes.merged;
  }
  if (node.children.length > 0) out.c = node.children.map(toViewerTree);
  return out;
}

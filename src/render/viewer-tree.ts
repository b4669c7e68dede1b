// The call tree the HTML viewer (d3-flame-graph) draws. Takes ordered stacks; gives nested nodes in
// d3-flame-graph's compact form: `n` name (annotation removed, sanitized), `v` total weight, `c` children in
// name order, `l` style code (omitted for native frames, to keep the page small).
import { describeFrame, sanitizeText, styleCodes } from './frames.js';
import { commonPrefix, type OrderedStacks } from './order.js';

export interface ViewerNode {
  n: string;
  v: number;
  l?: string;
  c?: ViewerNode[];
}

/** Builds the tree, its root named `all` carrying the total weight. */
export function buildViewerTree(ordered: OrderedStacks): ViewerNode {
  const root: ViewerNode = { n: 'all', v: 0 };
  const path: ViewerNode[] = [root];
  let previous: string[] = [];
  for (const { frames, weight } of ordered.stacks) {
    const shared = commonPrefix(previous, frames);
    for (let i = shared; i < frames.length; i++) {
      const { name, style } = describeFrame(frames[i]!);
      const node: ViewerNode = { n: sanitizeText(name), v: 0 };
      if (style !== 'native') node.l = styleCodes[style];
      const parent = path[i]!;
      (parent.c ??= []).push(node);
      path[i + 1] = node;
    }
    for (let i = 0; i <= frames.length; i++) path[i]!.v += weight;
    previous = frames;
  }
  return root;
}

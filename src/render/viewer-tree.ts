// The call tree the HTML viewer (d3-flame-graph) draws, as JSON written into a TextSink. Takes a FlameTree's root;
// gives nested nodes in d3-flame-graph's compact form: `n` name (annotation removed, sanitized), `v` total weight,
// `l` style code (omitted for native frames, to keep the page small), `c` children in the order of the sorted folded
// text. The text is what jsonForScript would make of such objects, written without building them: a name's JSON
// is made once per render however many nodes carry it.
import type { FlameNode } from './flame-layout.js';
import { describeFrame, jsonForScript, sanitizeText, styleCodes } from './frames.js';
import { encodeText, maxNumberBytes, type EncodedText, type TextSink } from './text-sink.js';

/** A node as the page's script reads it back. */
export interface ViewerNode {
  n: string;
  v: number;
  l?: string;
  c?: ViewerNode[];
}

interface NodeText {
  /** `{"n":"…","v":` */
  head: EncodedText;
  /** `,"l":"…"`, or nothing for native frames. */
  style: EncodedText;
}

const openChildren = encodeText(',"c":[');
const comma = encodeText(',');
const closeChildren = encodeText(']}');
const close = encodeText('}');

/** Writes the tree under `root` (named `all`; merged blocks are `[N frames]`). */
export function writeViewerTree(out: TextSink, root: FlameNode): void {
  const texts = new Map<string, NodeText>();
  const write = (node: FlameNode): void => {
    let text = node.kind === 'frame' ? texts.get(node.frame) : undefined;
    if (!text) {
      text = nodeText(node);
      if (node.kind === 'frame') texts.set(node.frame, text);
    }
    out.reserve(text.head.length + text.style.length + maxNumberBytes + openChildren.length);
    out.piece(text.head);
    // JSON has no Infinity or NaN: JSON.stringify writes null.
    if (Number.isFinite(node.weight)) out.number(node.weight);
    else out.append('null');
    out.piece(text.style);
    const children = node.children;
    if (children.length === 0) {
      out.piece(close);
      return;
    }
    out.piece(openChildren);
    for (let i = 0; i < children.length; i++) {
      if (i > 0) {
        out.reserve(comma.length);
        out.piece(comma);
      }
      write(children[i]!);
    }
    out.reserve(closeChildren.length);
    out.piece(closeChildren);
  };
  write(root);
}

function nodeText(node: FlameNode): NodeText {
  let name = 'all';
  let code: string | undefined;
  if (node.kind === 'frame') {
    const { name: shown, style } = describeFrame(node.frame);
    name = sanitizeText(shown);
    if (style !== 'native') code = styleCodes[style];
  } else if (node.kind === 'merged') {
    name = `[${node.merged} frames]`;
    code = styleCodes.merged;
  }
  return {
    head: encodeText(`{"n":${jsonForScript(name)},"v":`),
    style: encodeText(code === undefined ? '' : `,"l":${jsonForScript(code)}`),
  };
}

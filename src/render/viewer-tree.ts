// The call tree the HTML viewer (d3-flame-graph) draws, as JSON written into a TextSink. Takes a tree's columns;
// gives nested nodes in d3-flame-graph's compact form: `n` name (annotation removed, sanitized), `v` total weight,
// `l` style code (omitted for native frames, to keep the page small), `c` children in the order of the sorted folded
// text. The text is what jsonForScript would make of such objects, written without building them: a name's JSON
// is made once per render however many nodes carry it.
import { frameRow, mergedRow, type FlameColumns } from './flame-layout.js';
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

/**
 * Writes the tree of `tree`'s rows (the root named `all`; merged blocks are `[N frames]`). `extra` gives more members
 * for a row's node, JSON text starting with a comma (a differential graph's before and after weights).
 */
export function writeViewerTree(out: TextSink, tree: FlameColumns, extra?: (row: number) => string): void {
  const texts: (NodeText | undefined)[] = [];
  const { count, depth, kind, name, weight } = tree;
  for (let row = 0; row < count; row++) {
    let text: NodeText | undefined;
    if (kind[row] === frameRow) {
      text = texts[name[row]!];
      if (!text) {
        text = nodeText(frameRow, tree.names[name[row]!]!, 1);
        texts[name[row]!] = text;
      }
    } else text = nodeText(kind[row]!, '', tree.merged[row]!);
    out.reserve(text.head.length + text.style.length + maxNumberBytes + openChildren.length);
    out.piece(text.head);
    // JSON has no Infinity or NaN: JSON.stringify writes null.
    const value = weight[row]!;
    if (Number.isFinite(value)) out.number(value);
    else out.append('null');
    out.piece(text.style);
    if (extra) out.append(extra(row));
    // Rows are in walk order: the next row one level deeper is the first child; otherwise this node is a leaf and
    // the next row is a sibling of it or of an ancestor, whose open child lists end here.
    const here = depth[row]!;
    const next = row + 1 < count ? depth[row + 1]! : 0;
    if (next > here) {
      out.piece(openChildren);
      continue;
    }
    out.reserve(close.length + (here - next) * closeChildren.length + comma.length);
    out.piece(close);
    for (let d = next; d < here; d++) out.piece(closeChildren);
    if (row + 1 < count) out.piece(comma);
  }
}

/** What a row of `kind` starts with: `frame` is its text (frames only), `merged` how many frames it stands for. */
function nodeText(rowKind: number, frame: string, merged: number): NodeText {
  let name = 'all';
  let code: string | undefined;
  if (rowKind === frameRow) {
    const { name: shown, style } = describeFrame(frame);
    name = sanitizeText(shown);
    if (style !== 'native') code = styleCodes[style];
  } else if (rowKind === mergedRow) {
    name = `[${merged} frames]`;
    code = styleCodes.merged;
  }
  return {
    head: encodeText(`{"n":${jsonForScript(name)},"v":`),
    style: encodeText(code === undefined ? '' : `,"l":${jsonForScript(code)}`),
  };
}

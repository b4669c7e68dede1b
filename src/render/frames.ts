// Frame names as the renderers show them. Takes a folded frame (`name`, `name_[j]`, `[libfoo.so]`...); gives the
// bare name, the style the palettes colour by, and text made safe for XML and HTML (control characters stripped,
// truncated on a code-point boundary, markup escaped). Pure and browser-safe: the HTML viewer bundles it.

/** What a frame looks like in a flame graph; palettes pick a hue per style. */
export type FrameStyle =
  /** `_[j]`: managed .NET code (JIT or ReadyToRun). */
  | 'managed'
  /** `_[k]`: kernel code. */
  | 'kernel'
  /** `_[i]`: a frame inlined into its caller. */
  | 'inline'
  /** `[unknown]`, or `[libfoo.so]` (a known file without a symbol). */
  | 'unknown'
  /** Anything else: native code with a name. */
  | 'native'
  /** Not a frame: a block standing for several adjacent frames too light to draw one by one. */
  | 'merged';

export interface DisplayFrame {
  /** The name without its `_[x]` annotation (not yet sanitized). */
  name: string;
  style: FrameStyle;
}

const annotationStyles: Readonly<Record<string, FrameStyle>> = { j: 'managed', k: 'kernel', i: 'inline' };

/** Splits a folded frame into the name shown and the style it is coloured by. */
export function describeFrame(frame: string): DisplayFrame {
  let name = frame;
  let style: FrameStyle = 'native';
  const n = frame.length;
  // `_[x]` at the end; checked by hand because this runs once per drawn frame.
  if (n > 4 && frame.charCodeAt(n - 1) === 93 && frame.charCodeAt(n - 3) === 91 && frame.charCodeAt(n - 4) === 95) {
    const annotated = annotationStyles[frame.charAt(n - 2)];
    if (annotated) {
      name = frame.slice(0, -4);
      style = annotated;
    }
  }
  // A whole name in brackets is perf's way of saying "no symbol": `[unknown]`, `[libcoreclr.so]`, `[vdso]`.
  // .NET names such as `[System.Private.CoreLib] T::M[OptimizedTier1]` also start and end in brackets: the first
  // closing bracket must be the last character.
  if (name.length > 2 && name.charCodeAt(0) === 91 && name.indexOf(']') === name.length - 1) style = 'unknown';
  return { name, style };
}

/** One-letter codes for styles, used where the name would be repeated per node (the HTML viewer's data). */
export const styleCodes: Readonly<Record<FrameStyle, string>> = Object.freeze({
  managed: 'm',
  kernel: 'k',
  inline: 'i',
  unknown: 'u',
  native: 'n',
  merged: 'g',
});

/** The style of a one-letter code; native for anything unknown. */
export function styleOfCode(code: string | undefined): FrameStyle {
  switch (code) {
    case 'm':
      return 'managed';
    case 'k':
      return 'kernel';
    case 'i':
      return 'inline';
    case 'u':
      return 'unknown';
    case 'g':
      return 'merged';
    default:
      return 'native';
  }
}

// Characters XML 1.0 forbids or that only make trouble on screen: C0 controls (tab and newlines included, they
// would break a label's single line), DEL, C1 controls, U+FFFE/U+FFFF and lone surrogates.
const unsafeCharacters =
  /[\u0000-\u001f\u007f-\u009f\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

// Cheap first look: most names hold none of these, and surrogate pairs (emoji) are rare enough to check fully.
const maybeUnsafe = /[\u0000-\u001f\u007f-\u009f\ud800-\udfff\ufffe\uffff]/;

/** Removes characters that cannot appear in XML text or that would break a one-line label. */
export function sanitizeText(text: string): string {
  return maybeUnsafe.test(text) ? text.replace(unsafeCharacters, '') : text;
}

/**
 * Cuts `text` to at most `maxChars` UTF-16 units, ending in `..` when cut, never splitting a surrogate pair.
 * Returns '' when fewer than 3 characters fit, as flamegraph.pl does.
 */
export function truncateText(text: string, maxChars: number): string {
  if (text.length <= maxChars) return text;
  if (maxChars < 3) return '';
  let end = maxChars - 2;
  const code = text.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return `${text.slice(0, end)}..`;
}

const xmlEntities: Readonly<Record<string, string>> = {
  '<': '&lt;',
  '>': '&gt;',
  '&': '&amp;',
  '"': '&quot;',
  "'": '&#39;',
};
const xmlSpecial = /[<>&"']/g;
const hasXmlSpecial = /[<>&"']/;

/** Escapes markup characters for XML/HTML text and attribute values (after sanitizing and truncating). */
export function escapeXml(text: string): string {
  return hasXmlSpecial.test(text) ? text.replace(xmlSpecial, (c) => xmlEntities[c]!) : text;
}

/**
 * JSON for embedding in a `<script>` element or an XML CDATA section: `<`, `>`, `&` and U+2028/U+2029 become
 * `\uXXXX` escapes (equal to the originals inside JSON strings), so no `</script>`, `<!--` or `]]>` can appear.
 */
export function jsonForScript(value: unknown): string {
  // Five native passes beat one regular expression with a callback on multi-megabyte pages.
  return JSON.stringify(value)
    .replaceAll('<', '\\u003c')
    .replaceAll('>', '\\u003e')
    .replaceAll('&', '\\u0026')
    .replaceAll('\u2028', '\\u2028')
    .replaceAll('\u2029', '\\u2029');
}

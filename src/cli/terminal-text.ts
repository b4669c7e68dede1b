// Untrusted text (a target's command line, comm, paths, perf-map frame names, environment values) in, text safe to
// print on a terminal out: nothing the terminal would act on (escape sequences, line breaks, bidi reordering)
// survives, and every such character is shown instead, in the notation of a C or JavaScript string:
//   \n \r \t            newline, carriage return, tab
//   \xHH                any other C0 control (ESC is \x1b, BEL \x07), DEL, and the C1 controls U+0080-U+009F
//   \uHHHH              bidi embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069), lone surrogates
//   \\                  a backslash, so `\x1b` in the output can only have been an ESC
// Everything else is left as it is. Pure.

export interface TerminalTextOptions {
  /** Longest result in code points, the ellipsis included; an escape is never cut. Default: no limit. */
  readonly maxLength: number;
  /** Controls printed as they are (say '\t' for a line that may hold tabs). Default: none. */
  readonly keep: string;
  /**
   * Write a backslash as `\\`. Default true. False only where the text may already have been escaped (the
   * reporter's defence in depth), so that escaped text goes through unchanged instead of doubling its backslashes.
   */
  readonly escapeBackslash: boolean;
}

export const terminalTextDefaults: Readonly<TerminalTextOptions> = Object.freeze({
  maxLength: Infinity,
  keep: '',
  escapeBackslash: true,
});

const named: Readonly<Record<string, string>> = Object.freeze({ '\n': '\\n', '\r': '\\r', '\t': '\\t' });

/** C0, DEL, C1, bidi embeddings, overrides and isolates, and surrogates (a pair's halves included). */
function isShown(code: number): boolean {
  return (
    code <= 0x1f ||
    (code >= 0x7f && code <= 0x9f) ||
    (code >= 0x202a && code <= 0x202e) ||
    (code >= 0x2066 && code <= 0x2069) ||
    (code >= 0xd800 && code <= 0xdfff)
  );
}

const hex = (code: number, digits: number) => code.toString(16).padStart(digits, '0');

/** One code point (or lone surrogate) as printed. */
function escapeOne(char: string, options: TerminalTextOptions): string {
  if (char === '\\') return options.escapeBackslash ? '\\\\' : char;
  // A paired surrogate is one code point of two units, printed as it is.
  if (char.length > 1 || !isShown(char.charCodeAt(0)) || options.keep.includes(char)) return char;
  const code = char.charCodeAt(0);
  return named[char] ?? (code <= 0xff ? `\\x${hex(code, 2)}` : `\\u${hex(code, 4)}`);
}

function isPlain(text: string, options: TerminalTextOptions): boolean {
  if (text.length > options.maxLength) return false;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isShown(code) || (code === 0x5c && options.escapeBackslash)) return false;
  }
  return true;
}

/** `text` with every control, bidi override and lone surrogate shown visibly, cut to `maxLength` with `…`. */
export function terminalText(text: string, options: Partial<TerminalTextOptions> = {}): string {
  const o = { ...terminalTextDefaults, ...options };
  // The common case, nothing to show and nothing to cut, costs one scan and no allocation.
  if (isPlain(text, o)) return text;
  // Iterating a string yields code points, and a lone surrogate on its own.
  const pieces = Array.from(text, (char) => escapeOne(char, o));
  return cut(pieces, o.maxLength);
}

/** Joins the pieces, keeping whole pieces only and ending with `…` when they do not all fit in `max` code points. */
function cut(pieces: readonly string[], max: number): string {
  // A piece is one code point (a surrogate pair is two units) or an ASCII escape.
  const lengths = pieces.map((p) =>
    p.length === 2 && p.charCodeAt(0) >= 0xd800 && p.charCodeAt(0) <= 0xdbff ? 1 : p.length,
  );
  if (lengths.reduce((a, b) => a + b, 0) <= max) return pieces.join('');
  if (max < 1) return '';
  let kept = 0;
  for (let used = 0; kept < pieces.length && used + lengths[kept]! <= max - 1; kept++) used += lengths[kept]!;
  return `${pieces.slice(0, kept).join('')}…`;
}

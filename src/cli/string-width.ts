// The fast path the CLI bundle puts in front of the `string-width` packages yargs lays out its help with
// (scripts/build.mjs): a text of printable ASCII is as wide as it is long, which those packages compute by
// segmenting it into graphemes and testing each against an emoji pattern; so is one holding the typographic
// punctuation profcpu's texts use (’ ‘ “ ” – — … →, East Asian "ambiguous" characters those packages count one column
// wide unless told otherwise). Their module set-up (an Intl.Segmenter, the emoji pattern) and that test cost more
// start-up time than the rest of `profcpu --help`, and yargs lays out a command's help on every run of it (to have it
// ready should the command fail): any other text still goes to the package yargs would have used, loaded only then.
// test/cli/string-width.test.ts checks both give the same widths, and that every command's help takes the fast path.

/** Typographic punctuation one column wide, as string-width counts it by default. */
const narrowPunctuation = new Set([0x2018, 0x2019, 0x201c, 0x201d, 0x2013, 0x2014, 0x2026, 0x2192]);

/**
 * The width of a text made only of printable ASCII (space to `~`) and narrowPunctuation: its length; undefined for any
 * other text, and for punctuation when `options` ask for ambiguous characters to be wide.
 */
export function narrowTextWidth(text: unknown, options?: { ambiguousIsNarrow?: boolean }): number | undefined {
  if (typeof text !== 'string') return undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x20 && c <= 0x7e) continue;
    if (!narrowPunctuation.has(c) || options?.ambiguousIsNarrow === false) return undefined;
  }
  return text.length;
}

// The fast path the CLI bundle puts in front of the `string-width` packages yargs lays out its help with
// (scripts/build.mjs): a text of printable ASCII alone is as wide as it is long, which those packages compute by
// segmenting it into graphemes and testing each against an emoji pattern. Their module set-up (an Intl.Segmenter)
// and that test cost more start-up time than the rest of `profcpu --help`; any other text still goes to the package
// yargs would have used, loaded only then. test/cli/string-width.test.ts checks both give the same widths.

/** The width of a text made only of printable ASCII (space to `~`): its length; undefined for any other text. */
export function printableAsciiWidth(text: unknown): number | undefined {
  if (typeof text !== 'string') return undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return undefined;
  }
  return text.length;
}

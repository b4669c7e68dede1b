// For tests of terminal output: finds what a terminal would act on in printed text, so a hostile target's name can
// be shown to arrive escaped.
import assert from 'node:assert/strict';

/** The first character a terminal would act on (C0 but newline, DEL, C1, bidi controls, lone surrogates), with its offset. */
export function findTerminalControl(text: string): { at: number; code: string } | undefined {
  let at = 0;
  for (const char of text) {
    const code = char.codePointAt(0)!;
    const shown =
      (code <= 0x1f && code !== 0x0a) ||
      (code >= 0x7f && code <= 0x9f) ||
      (code >= 0x202a && code <= 0x202e) ||
      (code >= 0x2066 && code <= 0x2069) ||
      (code >= 0xd800 && code <= 0xdfff);
    if (shown) return { at, code: `U+${code.toString(16).padStart(4, '0')}` };
    at += char.length;
  }
  return undefined;
}

export function assertNoTerminalControl(text: string, what: string): void {
  const found = findTerminalControl(text);
  if (found)
    assert.fail(
      `${what} holds ${found.code} at ${found.at}: ${JSON.stringify(text.slice(Math.max(0, found.at - 40), found.at + 40))}`,
    );
}

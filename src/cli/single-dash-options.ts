// The original shell tool took long options with one dash (`collect -pid 1 -duration 10`, `postprocess -dir D`).
// yargs would read `-pid` as the flags -p -i -d, so such words are rewritten to `--pid` before parsing, but only
// for the long option names a command declares; anything after `--` is left alone.

export function singleDashToDouble(argv: readonly string[], longOptions: ReadonlySet<string>): string[] {
  const out: string[] = [];
  let passthrough = false;
  for (const arg of argv) {
    if (passthrough || arg === '--') {
      passthrough = true;
      out.push(arg);
      continue;
    }
    const match = /^-([a-z][a-z0-9-]+)(=.*)?$/.exec(arg);
    if (match && longOptions.has(match[1]!)) out.push(`-${arg}`);
    else out.push(arg);
  }
  return out;
}

// The CLI's voice: progress and warnings on stderr, results on stdout. Stages never print; they take a Warn
// callback (see src/diagnostics.ts) and the CLI hands them this reporter's warn.

export interface Reporter {
  /** Progress and status lines; silenced by --quiet. */
  info(message: string): void;
  /** Problems that do not stop the run; always shown. */
  warn(message: string): void;
  /** True when stderr is an interactive terminal (progress may redraw a line). */
  readonly interactive: boolean;
}

export function createReporter(options: { quiet?: boolean } = {}): Reporter {
  const interactive = Boolean(process.stderr.isTTY);
  return {
    interactive,
    info(message) {
      if (!options.quiet) process.stderr.write(`${message}\n`);
    },
    warn(message) {
      process.stderr.write(`profcpu: warning: ${message}\n`);
    },
  };
}

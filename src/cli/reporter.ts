// The CLI's voice: progress and warnings on stderr, results on stdout. Stages never print; they take a Warn
// callback (see src/diagnostics.ts) and the CLI hands them this reporter's warn.
import { terminalText } from './terminal-text.js';

export interface Reporter {
  /** Progress and status lines; silenced by --quiet. */
  info(message: string): void;
  /** Problems that do not stop the run; always shown. */
  warn(message: string): void;
  /** True when stderr is an interactive terminal (progress may redraw a line). */
  readonly interactive: boolean;
}

/**
 * A message as one line of stderr. Messages quote the target (its command line, paths inside it, perf's words
 * about it), so whatever a stage forgot to escape is made visible here: controls and line breaks inside the
 * message, bidi overrides. Tabs stay, and so do leading newlines, which end a redrawn progress line first.
 * Backslashes are not doubled: text a caller already escaped goes through unchanged.
 */
export function reporterLine(message: string): string {
  const lead = /^\n*/.exec(message)![0];
  return `${lead}${terminalText(message.slice(lead.length), { keep: '\t', escapeBackslash: false })}\n`;
}

export function createReporter(options: { quiet?: boolean } = {}): Reporter {
  const interactive = Boolean(process.stderr.isTTY);
  return {
    interactive,
    info(message) {
      if (!options.quiet) process.stderr.write(reporterLine(message));
    },
    warn(message) {
      process.stderr.write(reporterLine(`profcpu: warning: ${message}`));
    },
  };
}

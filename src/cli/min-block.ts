// `--min-block`, shared by collect and postprocess: the shortest stretch off the CPU the off-CPU profile keeps.
import { ProfcpuError } from '../error.js';

const microsecondsPer: Record<string, number> = { us: 1, µs: 1, ms: 1000, s: 1_000_000 };

/** `--min-block`'s yargs definition. */
export const minBlockOption = {
  type: 'string',
  describe:
    'With --off-cpu: stretches off the CPU shorter than this are left out of the off-CPU profile, counted ' +
    '(500us, 1ms; a bare number is microseconds; default 1us)',
} as const;

/** `500us`, `2ms`, `0.5s` or a bare number of microseconds, to microseconds; a usage error otherwise. */
export function parseMinBlock(text: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(us|µs|ms|s)?\s*$/.exec(text);
  const us = match ? Number(match[1]) * microsecondsPer[match[2] ?? 'us']! : Number.NaN;
  if (!Number.isFinite(us) || us > 3_600_000_000)
    throw new ProfcpuError('USAGE', `--min-block ${JSON.stringify(text)} is not a time (500us, 1ms, 0.5s)`, {
      remedy: 'Give --min-block a time: a number with us, ms or s (a bare number is microseconds).',
    });
  return us;
}

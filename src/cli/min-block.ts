// `--min-block`, shared by collect and postprocess: the shortest stretch off the CPU the off-CPU profile keeps.
import { ProfcpuError } from '../error.js';
import { minBlockMicroseconds } from '../postprocess/offcpu-outputs.js';

/** `--min-block`'s yargs definition. */
export const minBlockOption = {
  type: 'string',
  describe:
    'With --off-cpu: stretches off the CPU shorter than this are left out of the off-CPU profile, counted ' +
    '(500us, 1ms; a bare number is microseconds; default 1us)',
} as const;

/** minBlockMicroseconds, or a usage error. */
export function parseMinBlock(text: string): number {
  const us = minBlockMicroseconds(text);
  if (us === undefined)
    throw new ProfcpuError('USAGE', `--min-block ${JSON.stringify(text)} is not a time (500us, 1ms, 0.5s)`, {
      remedy: 'Give --min-block a time: a number with us, ms or s (a bare number is microseconds).',
    });
  return us;
}

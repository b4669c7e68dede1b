// The fold flags `fold` and `postprocess` share (frame names, event, weight), declared and mapped onto FoldOptions
// in one place.
import type { Argv } from 'yargs';
import { ProfcpuError } from '../error.js';
import { defaultFoldOptions, type FoldOptions } from '../stacks/fold.js';

export interface FoldFlagArgs {
  keepArgs: boolean;
  keepModule: boolean;
  keepTier: boolean;
  eventFilter?: string;
  weight?: string;
}

/** Declares --keep-args, --keep-module, --keep-tier, --event-filter and --weight; `weightDefault` for its help. */
export function withFoldFlags<T>(yargs: Argv<T>, weightDefault = 'samples') {
  return yargs
    .option('keep-args', {
      type: 'boolean',
      default: defaultFoldOptions.keepArguments,
      describe: 'Keep argument lists in frame names',
    })
    .option('keep-module', {
      type: 'boolean',
      default: defaultFoldOptions.keepModule,
      describe: 'Prefix .NET frames with their assembly (System.Private.CoreLib!...)',
    })
    .option('keep-tier', {
      type: 'boolean',
      default: defaultFoldOptions.keepTier,
      describe: 'Keep .NET JIT tiers ([OptimizedTier1]...)',
    })
    .option('event-filter', {
      type: 'string',
      describe: 'Fold only samples of this event (default: the first event seen)',
      requiresArg: true,
    })
    .option('weight', {
      type: 'string',
      choices: ['samples', 'period'],
      describe: `Weigh each sample as 1, or by its period (default: ${weightDefault})`,
    });
}

/** The fold options these flags set; `command` names the command whose help a usage error points to. */
export function foldFlagOptions(args: FoldFlagArgs, command: string): Partial<FoldOptions> {
  const options: Partial<FoldOptions> = {
    keepArguments: args.keepArgs,
    keepModule: args.keepModule,
    keepTier: args.keepTier,
  };
  if (args.eventFilter !== undefined) {
    if (args.eventFilter.trim() === '')
      throw new ProfcpuError('USAGE', '--event-filter needs an event name, such as cpu-clock', {
        remedy: `See \`profcpu ${command} --help\`.`,
      });
    options.eventFilter = args.eventFilter;
  }
  if (args.weight !== undefined) options.weight = args.weight as FoldOptions['weight'];
  return options;
}

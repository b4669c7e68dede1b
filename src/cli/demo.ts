// `profcpu demo`: profiles a bundled CPU-burning Node workload for a few seconds and writes a full output folder,
// whose flame graph shows the workload's JavaScript function names. The quickest check that perf works here.
import { ProfcpuError } from '../error.js';
import type { Argv, CommandModule } from 'yargs';
import { startDemoWorkload } from '../collect/demo.js';
import type { CollectStep } from '../step/step.js';
import { runCollectSession } from './collect.js';
import { createReporter } from './reporter.js';

interface DemoArgs {
  duration: number;
  frequency: number;
  output?: string;
  quiet: boolean;
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, DemoArgs> = {
  builder: (yargs) =>
    yargs
      .option('duration', { type: 'number', default: 5, describe: 'Seconds to record' })
      .option('frequency', { type: 'number', default: 99, describe: 'Samples per second' })
      .option('output', { type: 'string', describe: 'Output folder (default profilings/HH-MM-SS_YYYY-MM-DD)' })
      .option('quiet', { type: 'boolean', default: false, describe: 'Print only warnings, errors and the summary' })
      .check((args) => {
        if (!(args.duration > 0 && args.duration <= 600)) throw usage('--duration must be between 0 and 600 s');
        return true;
      }) as unknown as Argv<DemoArgs>,
  handler: async (args) => {
    const workload = await startDemoWorkload({
      nodePath: process.execPath,
      // Outlives the recording by a margin, and ends by itself should profcpu die.
      lifetimeSeconds: args.duration + 30,
    });
    createReporter({ quiet: args.quiet }).info(`started the demo workload (PID ${workload.pid})`);
    // Stopped once recording ends, so it no longer competes for the CPU with post-processing; that also exercises
    // the snapshots taken while it ran (node deletes its perf map on exit).
    const stopWorkload: CollectStep = {
      name: 'demo-workload',
      afterRecording: async () => {
        await workload.stop();
        return { stopped: true };
      },
    };
    try {
      await runCollectSession(
        {
          pid: workload.pid,
          // The workload keeps its threads: a perf that spins on exited ones records it as well per process.
          scope: 'process',
          durationSeconds: args.duration,
          frequency: args.frequency,
          ...(args.output !== undefined && { output: args.output }),
        },
        args.quiet,
        [stopWorkload],
      );
    } finally {
      await workload.stop();
    }
  },
};

export default command;

/** A check that failed: a usage error (exit 2), not an internal one. */
function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, {
    remedy: 'Give each option once, with a valid value; see --help.',
  });
}

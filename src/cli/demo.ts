// `profcpu demo`: profiles a bundled CPU-burning workload for a few seconds and writes a full output folder, whose
// flame graph shows the workload's method names. The workload is .NET (a small C# app built with the machine's SDK on
// first use; its perf map switched on by profcpu over the diagnostic socket) when a `dotnet` with an SDK is on PATH
// or in DOTNET_ROOT, else Node.js (`--workload` chooses). The quickest check that perf and profcpu work here.
import { ProfcpuError } from '../error.js';
import type { Argv, CommandModule } from 'yargs';
import { demoDefaults, demoWorkloadChoices, startDemo, type DemoWorkloadChoice } from '../collect/demo-choice.js';
import { defaultDemoCacheDir } from '../collect/demo-dotnet.js';
import { chosenSteps } from '../collect/registry.js';
import type { CollectStep } from '../step/step.js';
import { runCollectSession } from './collect.js';
import { createReporter } from './reporter.js';

interface DemoArgs {
  workload: DemoWorkloadChoice;
  duration: number;
  frequency: number;
  output?: string;
  quiet: boolean;
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, DemoArgs> = {
  builder: (yargs) =>
    yargs
      .option('workload', {
        choices: demoWorkloadChoices,
        default: demoDefaults.workload,
        describe:
          'What to profile: dotnet (a C# app built with your .NET SDK on first use, into ~/.cache/profcpu/demo), ' +
          'node, or auto: dotnet when a `dotnet` with an SDK is on PATH or in DOTNET_ROOT, else node',
      })
      .option('duration', { type: 'number', default: 5, describe: 'Seconds to record' })
      .option('frequency', { type: 'number', default: 99, describe: 'Samples per second' })
      .option('output', { type: 'string', describe: 'Output folder (default profilings/HH-MM-SS_YYYY-MM-DD)' })
      .option('quiet', { type: 'boolean', default: false, describe: 'Print only warnings, errors and the summary' })
      .check((args) => {
        if (!(args.duration > 0 && args.duration <= 600)) throw usage('--duration must be between 0 and 600 s');
        return true;
      }) as unknown as Argv<DemoArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const workload = await startDemo({
      workload: args.workload,
      nodePath: process.execPath,
      // Outlives the recording by a margin, and ends by itself should profcpu die.
      lifetimeSeconds: args.duration + 30,
      env: process.env,
      cacheDir: defaultDemoCacheDir(process.env),
      progress: (m) => reporter.info(m),
      warn: (m) => reporter.warn(m),
    });
    reporter.info(`started ${workload.title} (PID ${workload.pid}; ${workload.details})`);
    // Stopped once recording ends, so it no longer competes for the CPU with post-processing; that also exercises
    // the snapshots taken while it ran (node deletes its perf map on exit).
    const demoStep: CollectStep = {
      name: 'demoWorkload',
      beforeRecording: () => Promise.resolve(workload.report),
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
        // The .NET workload's perf map is switched on over its diagnostic socket (`collect --perfmap auto`) and off
        // again before the workload is stopped (so the demo's step comes last); debug files are not fetched: the
        // demo needs no network.
        [...chosenSteps({ dotnet: { mode: 'auto' }, debugFiles: { mode: 'none', servers: [] } }), demoStep],
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

// `profcpu doctor [--pid N | --name NAME] [--output DIR]`: the checks collect runs before recording, each printed
// with its remedy. Exit code 0 when all pass, 3 when some only warn, 1 when one is fatal (collect would stop).
// Messages quote the target (its comm, command line, paths, environment), so they are escaped for the terminal.
import type { Argv, CommandModule } from 'yargs';
import { isProfcpuError } from '../error.js';
import { gatherFacts, judgeFacts, worstStatus, type Check } from '../perf/preflight.js';
import { chooseTarget } from '../target/discover.js';
import { createReporter } from './reporter.js';
import { terminalText } from './terminal-text.js';

interface DoctorArgs {
  pid?: number;
  name?: string;
  output: string;
  quiet: boolean;
}

export const doctorExitCodes = Object.freeze({ ok: 0, fatal: 1, warn: 3 });

const label = { ok: 'ok   ', warn: 'warn ', fatal: 'FAIL ' } as const;

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, DoctorArgs> = {
  builder: (yargs) =>
    yargs
      .option('pid', { type: 'number', describe: 'The process to check (default: the one collect would choose)' })
      .option('name', { type: 'string', describe: 'The process to check, by name' })
      .option('output', { type: 'string', default: '.', describe: 'Where recordings will be written (disk space)' })
      .option('quiet', { type: 'boolean', default: false, describe: 'Print only the checks that are not ok' })
      .conflicts('pid', 'name') as unknown as Argv<DoctorArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const checks: Check[] = [];
    let pid = args.pid;
    if (pid === undefined) {
      // The same choice collect makes, so doctor checks the process collect would record.
      try {
        const chosen = await chooseTarget(args.name === undefined ? {} : { name: args.name });
        pid = chosen.target.pid;
        checks.push({
          id: 'target-choice',
          status: 'ok',
          message: `collect would profile PID ${pid}: ${chosen.reason}`,
        });
      } catch (error) {
        if (!isProfcpuError(error)) throw error;
        checks.push({
          id: 'target-choice',
          status: 'fatal',
          message: error.message,
          ...(error.remedy && { remedy: error.remedy }),
        });
      }
    }
    const facts = await gatherFacts({ ...(pid !== undefined && { pid }), outputDir: args.output });
    checks.push(...judgeFacts(facts));
    for (const check of checks) {
      if (args.quiet && check.status === 'ok') continue;
      process.stdout.write(`${label[check.status]}${check.id}: ${terminalText(check.message)}\n`);
      if (check.remedy && check.status !== 'ok') process.stdout.write(`       fix: ${terminalText(check.remedy)}\n`);
    }
    const worst = worstStatus(checks);
    reporter.info(
      worst === 'ok'
        ? 'all checks passed'
        : worst === 'warn'
          ? 'collect can run, with the warnings above'
          : 'collect would stop: fix the FAIL lines',
    );
    process.exitCode = doctorExitCodes[worst];
  },
};

export default command;

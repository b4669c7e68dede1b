// `profcpu watch`: runs for hours (a sidecar's main process) and profiles by itself when its rules say so: rules from
// a JSON or YAML file (--rules), or the simple case from flags (--cpu-above 80 --for 30s --duration 20). One log line
// per trigger and per action on stderr, each with its UTC time. The first Ctrl-C or SIGTERM ends the watch: a profile
// under way stops recording and is still post-processed; a second one abandons it (its folder is removed). SIGUSR1
// triggers the rules whose trigger is `demand`.
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Argv, CommandModule } from 'yargs';
import { chosenSteps } from '../collect/registry.js';
import { ProfcpuError } from '../error.js';
import { choosePerf } from '../perf/select.js';
import { postprocess } from '../postprocess/postprocess.js';
import { symbolServerList } from '../debug-files/symbol-server.js';
import { profileAction } from '../watch/actions.js';
import { dumpAction } from '../watch/dump-action.js';
import {
  maxRulesFileBytes,
  parseRulesText,
  ruleDefaults,
  rulesError,
  validateRules,
  type WatchRules,
} from '../watch/rules.js';
import { watchDefaults, Watcher } from '../watch/watcher.js';
import { collectOptions, type CollectArgs } from './collect.js';
import { sidecarSettings } from './sidecar-settings.js';
import { createReporter, reporterLine } from './reporter.js';

/** watch's own flags, and collect's for the profile action. */
interface WatchArgs extends CollectArgs {
  rules?: string;
  cpuAbove?: number;
  for: string;
  of: 'core' | 'quota';
  every?: string;
  onDemand: boolean;
  commandLine?: string;
  maxActions?: number;
  window?: string;
  cooldown?: string;
  lifetime?: string;
  maxRuns?: number;
  maxBytes?: string;
  poll: number;
}

/** The flags that make the one rule of the simple case; with --rules, none of them may be given. */
const simpleFlags = [
  'cpu-above',
  'every',
  'on-demand',
  'pid',
  'name',
  'command-line',
  'max-actions',
  'window',
  'cooldown',
  'lifetime',
  'max-runs',
  'max-bytes',
] as const;

function watchOptions<T>(yargs: Argv<T>) {
  return collectOptions(yargs)
    .option('pid', { type: 'number', describe: 'Watch this PID only (default: every .NET process visible)' })
    .option('name', { type: 'string', describe: 'Watch the processes with this name (comm, executable or dll name)' })
    .option('output', {
      type: 'string',
      describe: 'The watch folder: one folder per run, index.json, index.html (default profilings/watch)',
    })
    .option('duration', {
      type: 'number',
      default: ruleDefaults.profile.durationSeconds,
      describe: 'Seconds each profile records (a rules file gives its own)',
    })
    .option('frequency', {
      type: 'number',
      default: ruleDefaults.profile.frequency,
      describe: 'Samples per second of each profile (a rules file gives its own)',
    })
    .option('rules', { type: 'string', describe: 'Rules file, JSON or YAML (docs/watch.md, "Rules files")' })
    .option('cpu-above', {
      type: 'number',
      describe:
        'Profile when the process uses at least this percent of a core (of its CPU quota with --of quota) over --for',
    })
    .option('for', { type: 'string', default: '30s', describe: 'The window --cpu-above averages over (e.g. 30s, 2m)' })
    .option('of', {
      choices: ['core', 'quota'] as const,
      default: 'core' as const,
      describe: '--cpu-above is a share of one core, or of the container’s CPU quota (cgroup cpu.max)',
    })
    .option('every', { type: 'string', describe: 'Profile on a schedule, every this long (e.g. 1h)' })
    .option('on-demand', {
      type: 'boolean',
      default: false,
      describe: 'Profile on SIGUSR1, or when a file named rule1 is dropped in the folder triggers/',
    })
    .option('command-line', { type: 'string', describe: 'Watch the processes whose command line contains this' })
    .option('max-actions', {
      type: 'number',
      describe: `Profiles at most per --window (default ${ruleDefaults.limits.maxActions})`,
    })
    .option('window', { type: 'string', describe: 'The sliding window of --max-actions (default 1h)' })
    .option('cooldown', {
      type: 'string',
      describe: 'Time after a profile during which the rule does not act (default 1m)',
    })
    .option('lifetime', { type: 'string', describe: 'The rule ends after this long (default: never)' })
    .option('max-runs', {
      type: 'number',
      describe: `Runs kept, oldest removed first (default ${ruleDefaults.retention.maxRuns})`,
    })
    .option('max-bytes', { type: 'string', describe: 'Bytes of runs kept, oldest removed first (default 2GiB)' })
    .option('poll', {
      type: 'number',
      default: watchDefaults.pollMs / 1000,
      describe: 'Seconds between two readings of the processes’ CPU',
    })
    .check((args) => {
      if (args.rules !== undefined) {
        const given = simpleFlags.filter((f) => args[f] !== undefined && args[f] !== false);
        if (given.length > 0)
          throw usage(`--rules and --${given[0]}: the rules file says it all, give one or the other`);
      } else if (
        [args['cpu-above'] !== undefined, args.every !== undefined, args['on-demand']].filter(Boolean).length !== 1
      )
        throw usage('give --rules FILE, or one trigger: --cpu-above N, --every DURATION or --on-demand');
      if (!(Number(args.poll) >= 0.1 && Number(args.poll) <= 60)) throw usage('--poll must be from 0.1 to 60 seconds');
      return true;
    });
}

/** The one rule of the simple case, validated as a rules file would be (so its errors name the same fields). */
export function rulesFromFlags(args: WatchArgs): WatchRules {
  const trigger =
    args.cpuAbove !== undefined
      ? { type: 'cpu', above: args.cpuAbove, for: args.for, of: args.of }
      : args.every !== undefined
        ? { type: 'schedule', every: args.every }
        : { type: 'demand' };
  const filters = {
    ...(args.pid !== undefined && { pid: args.pid }),
    ...(args.name !== undefined && { name: args.name }),
    ...(args.commandLine !== undefined && { commandLine: args.commandLine }),
  };
  const limits = {
    ...(args.maxActions !== undefined && { maxActions: args.maxActions }),
    ...(args.window !== undefined && { window: args.window }),
    ...(args.cooldown !== undefined && { cooldown: args.cooldown }),
    ...(args.lifetime !== undefined && { lifetime: args.lifetime }),
  };
  const retention = {
    ...(args.maxRuns !== undefined && { maxRuns: args.maxRuns }),
    ...(args.maxBytes !== undefined && { maxBytes: args.maxBytes }),
  };
  return validateRules({
    rules: [
      {
        name: 'rule1',
        ...(Object.keys(filters).length > 0 && { filters }),
        trigger,
        actions: [
          {
            kind: 'profile',
            duration: args.duration,
            frequency: args.frequency,
            unwind: args.unwind,
            ...(args.offCpu && { offCpu: true }),
            ...(args.minBlock !== undefined && { minBlock: args.minBlock }),
          },
        ],
        limits,
      },
    ],
    retention,
  });
}

/** Every action kind this build runs. */
const availability = { profile: true, dump: true } as const;

async function readRules(path: string): Promise<WatchRules> {
  const text = await readFile(path).catch((error: unknown) => {
    throw new ProfcpuError('USAGE', `cannot read the rules file ${path}: ${(error as Error).message}`, {
      remedy: 'Give --rules the path of a JSON or YAML rules file.',
    });
  });
  if (text.length > maxRulesFileBytes) throw rulesError('', `the file is over ${maxRulesFileBytes} bytes`);
  return parseRulesText(text.toString('utf8'), availability);
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, WatchArgs> = {
  builder: (yargs) => watchOptions(yargs) as unknown as Argv<WatchArgs>,
  handler: async (args) => {
    const reporter = createReporter({ quiet: args.quiet });
    const rules = args.rules !== undefined ? await readRules(args.rules) : rulesFromFlags(args);
    const servers = symbolServerList({ flags: args.symbolServer ?? [], env: process.env, offline: args.offline }, (m) =>
      reporter.warn(m),
    );
    const perfPath = args.perf ?? (await choosePerf()).path;
    const sidecar = sidecarSettings(process.env, reporter);
    const log = (line: string) => process.stderr.write(reporterLine(`${new Date().toISOString()} watch: ${line}`));
    const stop = new AbortController();
    const abort = new AbortController();
    const onSignal = (name: NodeJS.Signals) => {
      if (!stop.signal.aborted) {
        log(
          `${name}: ending; an action under way is finished first (a profile stops recording now; again to abandon it)`,
        );
        stop.abort();
      } else if (!abort.signal.aborted) {
        log(`${name}: abandoning the action under way; its folder is removed`);
        abort.abort();
      }
    };
    const runners = {
      dump: dumpAction({ ...(sidecar.owner && { owner: sidecar.owner }) }),
      profile: profileAction(
        {
          perfPath,
          ...(args.event !== undefined && { event: args.event }),
          snapshotMaxBytes: Math.round(args.snapshotLimit * (1 << 20)),
          scope: args.scope,
          postprocess: args.postprocess,
          ...(sidecar.owner && { owner: sidecar.owner }),
        },
        {
          postprocess,
          steps: () =>
            chosenSteps({
              dotnet: { mode: args.perfmap },
              debugFiles: { mode: args.symbols, servers, env: process.env },
            }),
        },
      ),
    };
    const watcher = new Watcher(
      {
        rules,
        dir: resolve(args.output ?? join(process.cwd(), 'profilings', 'watch')),
        pollMs: Math.round(args.poll * 1000),
        scanMs: watchDefaults.scanMs,
        procRoot: watchDefaults.procRoot,
        ...(sidecar.owner && { owner: sidecar.owner }),
      },
      {
        runners,
        stop: stop.signal,
        signal: abort.signal,
        log,
        warn: (m) => reporter.warn(m),
        info: (m) => reporter.info(m),
      },
    );
    const onDemand = () => {
      log('SIGUSR1: on-demand rules trigger');
      watcher.demand();
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    process.on('SIGUSR1', onDemand);
    try {
      const summary = await watcher.run();
      log(`ended (${summary.end}) after ${summary.runs} run(s)`);
      if (summary.end === 'aborted') process.exitCode = 130;
    } finally {
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
      process.off('SIGUSR1', onDemand);
    }
  },
};

export default command;

function usage(message: string): ProfcpuError {
  return new ProfcpuError('USAGE', message, { remedy: 'See `profcpu watch --help`.' });
}

#!/usr/bin/env node
// profcpu's entry point: arguments in, exit code out. Each command lives in its own file under src/cli/, loaded only
// when it is run (commands.ts); this file only wires them into yargs, rewrites the original tool's one-dash spelling,
// and turns errors into messages.
import { toolInfo } from '../output/manifest.js';
import { isProfcpuError, ProfcpuError } from '../error.js';
import { reporterLine } from './reporter.js';
import { singleDashToDouble } from './single-dash-options.js';
import { commands, singleDashOptions } from './commands.js';

export async function main(argv: readonly string[]): Promise<void> {
  // `profcpu --version` alone answers without loading the argument parser (a third of the start-up time).
  const { version } = await toolInfo();
  if (argv.length === 1 && argv[0] === '--version') {
    process.stdout.write(`${version}\n`);
    return;
  }
  const { default: yargs } = await import('yargs');
  const args = singleDashToDouble(argv, singleDashOptions);
  let parser = yargs(args)
    .scriptName('profcpu')
    .usage('$0 <command> [options]\n\nCPU profiler for .NET (and other perf-map) processes in Linux containers.')
    .strict()
    .demandCommand(1, 'Name a command: collect, watch, postprocess, dump, demo, doctor, ps, symbols, fold or render.')
    .recommendCommands()
    .help()
    .alias('h', 'help')
    .version(version)
    .wrap(Math.min(120, process.stdout.columns || 100))
    .epilogue('Each command has its own --help. README.md walks through profiling a container.')
    .fail((message, error) => {
      if (error) throw error;
      throw new ProfcpuError('USAGE', message, { remedy: 'See `profcpu <command> --help`.' });
    });
  // Only the command being run is loaded; the others are listed by name for --help and suggestions.
  const invoked = args.find((a) => !a.startsWith('-'));
  for (const entry of commands) {
    if (entry.command.split(' ')[0] === invoked) {
      const { default: module } = await entry.load();
      parser = parser.command({ ...module, command: entry.command, describe: entry.describe });
    } else parser = parser.command(entry.command, entry.describe, {}, () => {});
  }
  await parser.parseAsync();
}

function report(error: unknown): void {
  if (isProfcpuError(error)) {
    // Messages may quote the target (its command line, perf's stderr about its files): shown escaped.
    process.stderr.write(reporterLine(`profcpu: error: ${error.message}`));
    if (error.remedy) process.stderr.write(reporterLine(`  fix: ${error.remedy}`));
    if (process.env['PROFCPU_DEBUG'] && error.cause)
      process.stderr.write(reporterLine(`  cause: ${String(error.cause)}`));
    process.exitCode = error.code === 'USAGE' ? 2 : error.code === 'ABORTED' ? 130 : 1;
    return;
  }
  process.stderr.write(
    `profcpu: internal error (please report it): ${error instanceof Error ? error.stack : String(error)}\n`,
  );
  process.exitCode = 70;
}

main(process.argv.slice(2)).catch(report);

// `profcpu ps [--all] [--json]`: the visible processes worth profiling (.NET, or anything writing a perf map), with
// their PID here and in their own namespace, runtime, perf map state and command line. The table's cells come from
// the processes themselves, so they are escaped for the terminal; --json keeps the original strings (JSON escapes
// controls itself).
import type { Argv, CommandModule } from 'yargs';
import { isWorthProfiling, listProcesses } from '../target/discover.js';
import type { TargetInfo } from '../target/inspect.js';
import { createReporter } from './reporter.js';
import { terminalText } from './terminal-text.js';

interface PsArgs {
  all: boolean;
  json: boolean;
}

function runtimeLabel(info: TargetInfo): string {
  if (info.runtime !== 'dotnet') return info.runtime;
  return `.NET ${info.dotnet?.version ?? '?'}`;
}

function perfMapLabel(info: TargetInfo): string {
  if (info.perfMap.present) return `yes ${Math.round((info.perfMap.size ?? 0) / 1024)}K`;
  const setting = info.dotnet?.perfMapEnabled;
  return setting === undefined ? 'no' : `no (PerfMapEnabled=${setting})`;
}

/**
 * Rows as fixed-width text columns, the last column left unpadded. Cells are escaped first (a newline in a command
 * line would forge a row, an escape sequence would reach the terminal), so widths are those of the text printed.
 */
export function formatTable(cells: readonly (readonly string[])[]): string[] {
  const rows = cells.map((r) => r.map((cell) => terminalText(cell)));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((cell, i) => (i === r.length - 1 ? cell : cell.padEnd(widths[i]!))).join('  '));
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, PsArgs> = {
  builder: (yargs) =>
    yargs
      .option('all', { type: 'boolean', default: false, describe: 'List every visible process' })
      .option('json', { type: 'boolean', default: false, describe: 'Print JSON' }) as unknown as Argv<PsArgs>,
  handler: async (args) => {
    const processes = (await listProcesses()).filter((p) => args.all || isWorthProfiling(p));
    if (args.json) {
      process.stdout.write(`${JSON.stringify(processes, null, 2)}\n`);
      return;
    }
    if (processes.length === 0) {
      createReporter().info(
        args.all
          ? 'no process is visible'
          : "no .NET process and no process with a perf map is visible (try --all; from a container, share the target's PID namespace)",
      );
      return;
    }
    const rows = [
      ['PID', 'NSPID', 'RUNTIME', 'PERFMAP', 'COMMAND'],
      ...processes.map((p) => [String(p.pid), String(p.nspid), runtimeLabel(p), perfMapLabel(p), p.cmdline.join(' ')]),
    ];
    process.stdout.write(`${formatTable(rows).join('\n')}\n`);
  },
};

export default command;

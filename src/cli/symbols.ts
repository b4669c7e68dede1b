// `profcpu symbols`: fetches debug files by build-id for a running process's native libraries (--pid) or for ELF
// files (--file), verifies them and places them in perf's build-id cache, so `perf script` here names the frames.
// One line per library on stdout (or the report as JSON); exit code 1 when symbols were needed and none were found.
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { ProfcpuError } from '../error.js';
import { perfBuildIdDir } from '../perf/buildid-cache.js';
import { fetchFileSymbols, fetchTargetSymbols, type SymbolsReport } from '../debug-files/debug-symbols.js';
import { defaultSymbolCacheDir } from '../debug-files/symbol-cache.js';
import { symbolFetchDefaults } from '../debug-files/symbol-server-fetch.js';
import { microsoftSymbolServer, symbolServerList } from '../debug-files/symbol-server.js';
import { createReporter } from './reporter.js';
import { terminalText } from './terminal-text.js';

interface SymbolsArgs {
  pid?: number;
  file?: string[];
  libraries: 'coreclr' | 'all';
  symbolServer?: string[];
  offline: boolean;
  cacheDir?: string;
  buildidDir?: string;
  timeout: number;
  downloadTimeout: number;
  json: boolean;
  quiet: boolean;
}

const mib = (n: number) => `${(n / (1 << 20)).toFixed(1)} MiB`;

function builder(yargs: Argv): Argv<SymbolsArgs> {
  return yargs
    .option('pid', { type: 'number', describe: 'Process whose mapped native libraries need symbols' })
    .option('file', { type: 'string', array: true, describe: 'ELF file that needs symbols (repeatable)' })
    .option('libraries', {
      choices: ['coreclr', 'all'] as const,
      default: 'all' as const,
      describe: 'With --pid: libcoreclr.so only, or every mapped library lacking symbols',
    })
    .option('symbol-server', {
      type: 'string',
      array: true,
      describe:
        'Server to ask, in order (repeatable): URL, debuginfod:URL, ssqp:URL or microsoft. Default: ' +
        `PROFCPU_SYMBOL_SERVERS, else DEBUGINFOD_URLS then ${microsoftSymbolServer}`,
    })
    .option('offline', { type: 'boolean', default: false, describe: 'Ask no server: use profcpu’s cache only' })
    .option('cache-dir', { type: 'string', describe: 'profcpu’s symbol cache (default ~/.cache/profcpu/symbols)' })
    .option('buildid-dir', { type: 'string', describe: 'perf’s build-id cache (default: what perf uses, ~/.debug)' })
    .option('timeout', {
      type: 'number',
      default: symbolFetchDefaults.answerTimeoutMs / 1000,
      describe: 'Seconds a server may take to answer (and to pause in a body)',
    })
    .option('download-timeout', {
      type: 'number',
      default: symbolFetchDefaults.totalTimeoutMs / 1000,
      describe: 'Seconds one download from one server may take in all, retries and redirects included',
    })
    .option('json', { type: 'boolean', default: false, describe: 'Print the report as JSON' })
    .option('quiet', { alias: 'q', type: 'boolean', default: false, describe: 'No progress lines' })
    .check((argv) => {
      if ((argv.pid === undefined) === (argv.file === undefined || argv.file.length === 0))
        throw new ProfcpuError('USAGE', 'name either --pid or --file', { remedy: 'See `profcpu symbols --help`.' });
      if (argv.pid !== undefined && !(Number.isInteger(argv.pid) && argv.pid > 0))
        throw new ProfcpuError('USAGE', `--pid ${argv.pid} is not a process id`);
      if (!(argv.timeout > 0)) throw new ProfcpuError('USAGE', '--timeout must be a positive number of seconds');
      if (!(argv['download-timeout'] > 0))
        throw new ProfcpuError('USAGE', '--download-timeout must be a positive number of seconds');
      return true;
    }) as unknown as Argv<SymbolsArgs>;
}

async function handler(argv: ArgumentsCamelCase<SymbolsArgs>): Promise<void> {
  const reporter = createReporter({ quiet: argv.quiet });
  const servers = symbolServerList(
    { flags: argv.symbolServer ?? [], env: process.env, offline: argv.offline },
    reporter.warn,
  );
  if (servers.length === 0 && !argv.offline) reporter.warn('no usable symbol server: only the cache is used');
  const controller = new AbortController();
  const abort = () => controller.abort();
  process.once('SIGINT', abort);
  try {
    const buildIdDir = await perfBuildIdDir({ explicit: argv.buildidDir, signal: controller.signal });
    const options = {
      servers,
      cacheDir: argv.cacheDir ?? defaultSymbolCacheDir(process.env),
      buildIdDir,
      fetch: {
        answerTimeoutMs: argv.timeout * 1000,
        idleTimeoutMs: argv.timeout * 1000,
        totalTimeoutMs: argv.downloadTimeout * 1000,
      },
      signal: controller.signal,
      warn: reporter.warn,
      progress: (p: { buildId: string; received: number; total: number | undefined }) =>
        reporter.info(`${p.buildId}: ${mib(p.received)}${p.total ? ` of ${mib(p.total)}` : ''}`),
    };
    const report =
      argv.pid !== undefined
        ? await fetchTargetSymbols({ ...options, pid: argv.pid, libraries: argv.libraries })
        : await fetchFileSymbols(argv.file ?? [], options);
    process.stdout.write(argv.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
    const needed = report.libraries.filter((l) => !['has-symbols', 'no-build-id'].includes(l.status));
    if (needed.length > 0 && !needed.some((l) => l.status === 'placed' || l.status === 'present')) {
      reporter.warn('no debug file was found for any library that lacks symbols');
      process.exitCode = 1;
    }
  } finally {
    process.off('SIGINT', abort);
  }
}

/** One line per library: status, build-id, path, and where the debug file came from or why there is none. */
export function formatReport(report: SymbolsReport): string {
  if (report.libraries.length === 0) return 'no native library found\n';
  return report.libraries
    .map((l) => {
      const where =
        l.status === 'placed'
          ? `from ${l.source} -> ${l.placedAt}`
          : l.status === 'present'
            ? `already in ${l.placedAt}`
            : (l.reason ?? '');
      // Paths and reasons come from the target's maps and files: shown escaped.
      const line = `${l.status.padEnd(11)} ${(l.buildId ?? '-').padEnd(40)} ${l.path}${where ? `  ${where}` : ''}`;
      return `${terminalText(line)}\n`;
    })
    .join('');
}

/** Its name and description are in commands.ts, which loads this file only when the command is run. */
const command: CommandModule<object, SymbolsArgs> = {
  builder,
  handler,
};

export default command;

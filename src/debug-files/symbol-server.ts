// Symbol-server specifications in (command-line flags, PROFCPU_SYMBOL_SERVERS, DEBUGINFOD_URLS), an ordered list of
// servers out, and for each server and build-id the one URL its protocol gives the debug file. Two protocols:
// Microsoft's SSQP (dotnet/symstore SSQP_Key_Conventions.md) and elfutils' debuginfod. Pure: no I/O here.
import type { Warn } from '../diagnostics.js';

export type SymbolServerKind = 'ssqp' | 'debuginfod';

export interface SymbolServer {
  kind: SymbolServerKind;
  /** Base URL without a trailing slash. */
  url: string;
  /** Where it came from, for messages and the manifest: `--symbol-server`, an environment variable, or `default`. */
  origin: string;
}

/** Microsoft's public symbol server: the one that has libcoreclr.so's debug file for Microsoft-built runtimes. */
export const microsoftSymbolServer = 'https://msdl.microsoft.com/download/symbols';

export interface SymbolServerSources {
  /** `--symbol-server` values in order (each may hold several, separated by spaces or commas). */
  flags?: readonly string[];
  /** The environment: PROFCPU_SYMBOL_SERVERS and DEBUGINFOD_URLS are read. */
  env?: Readonly<Record<string, string | undefined>>;
  /** `--offline`: no server at all. */
  offline?: boolean;
}

/**
 * The servers to ask, in order. Servers named on the command line come first, then PROFCPU_SYMBOL_SERVERS; when
 * neither names any, the defaults: every DEBUGINFOD_URLS server, then Microsoft's. The word `microsoft` in a list
 * stands for Microsoft's server. Malformed entries are skipped with a warning; duplicates are dropped.
 */
export function symbolServerList(sources: SymbolServerSources, warn: Warn): SymbolServer[] {
  if (sources.offline) return [];
  const env = sources.env ?? {};
  const chosen: SymbolServer[] = [];
  let named = false;
  const addAll = (text: string, origin: string, kind?: SymbolServerKind) => {
    for (const spec of splitList(text)) {
      named = true;
      const parsed = parseSymbolServer(spec, origin, kind);
      if (typeof parsed === 'string') warn(`ignoring symbol server ${JSON.stringify(spec)} from ${origin}: ${parsed}`);
      else if (!chosen.some((s) => s.url === parsed.url && s.kind === parsed.kind)) chosen.push(parsed);
    }
  };
  for (const flag of sources.flags ?? []) addAll(flag, '--symbol-server');
  addAll(env['PROFCPU_SYMBOL_SERVERS'] ?? '', 'PROFCPU_SYMBOL_SERVERS');
  if (!named) {
    addAll(env['DEBUGINFOD_URLS'] ?? '', 'DEBUGINFOD_URLS', 'debuginfod');
    addAll('microsoft', 'default');
  }
  return chosen;
}

function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter((s) => s !== '');
}

/**
 * One server specification: `URL`, `debuginfod:URL`, `ssqp:URL` or `microsoft`. Without a prefix, a URL whose host
 * or path mentions debuginfod is a debuginfod server, anything else SSQP. Returns the reason when it is unusable.
 */
export function parseSymbolServer(spec: string, origin: string, kind?: SymbolServerKind): SymbolServer | string {
  let rest = spec.trim();
  if (rest.toLowerCase() === 'microsoft') return { kind: 'ssqp', url: microsoftSymbolServer, origin };
  const prefix = /^(debuginfod|ssqp):(?!\/\/)/i.exec(rest);
  if (prefix) {
    kind = prefix[1]!.toLowerCase() as SymbolServerKind;
    rest = rest.slice(prefix[0].length);
  }
  let url: URL;
  try {
    url = new URL(rest);
  } catch {
    return 'not a URL (expected http://host/path or https://host/path)';
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return `unsupported scheme ${url.protocol}`;
  if (url.search || url.hash) return 'a server URL takes no query or fragment';
  if (url.username || url.password) return 'credentials in the URL are not supported';
  const base = url.href.replace(/\/+$/, '');
  return { kind: kind ?? (/debuginfod/i.test(base) ? 'debuginfod' : 'ssqp'), url: base, origin };
}

/** The SSQP key of the debug file for an ELF build-id: `_.debug/elf-buildid-sym-<40 hex>/_.debug`. */
export function ssqpDebugKey(buildId: string): string {
  // SSQP keys are lower case; build-ids shorter than 20 bytes (e.g. 8-byte xxhash ids) are zero-padded to 40 digits.
  return `_.debug/elf-buildid-sym-${buildId.toLowerCase().padEnd(40, '0')}/_.debug`;
}

/** The URL at which `server` serves the debug file of `buildId`. */
export function debugFileUrl(server: SymbolServer, buildId: string): string {
  const id = buildId.toLowerCase();
  return server.kind === 'ssqp' ? `${server.url}/${ssqpDebugKey(id)}` : `${server.url}/buildid/${id}/debuginfo`;
}

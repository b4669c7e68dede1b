// profcpu's on-disk cache of debug files, keyed by build-id: `<dir>/<xx>/<rest>.debug`, every file in it verified
// (its own build-id equals its key) before it is renamed into place, so a reader never sees a partial or wrong
// file. Downloads are written under `<dir>/tmp/` first. Misses (a server answered 404) are remembered per server in
// `<dir>/misses/<build-id>.json` for a while, so a runtime without published symbols costs one request per day.
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { ProfcpuError } from '../error.js';
import { isBuildId, readElfFile } from '../formats/elf/elf.js';

/** The cache folder: `$XDG_CACHE_HOME/profcpu/symbols`, else `~/.cache/profcpu/symbols`. */
export function defaultSymbolCacheDir(env: Readonly<Record<string, string | undefined>>, home = homedir()): string {
  const xdg = env['XDG_CACHE_HOME'];
  return join(xdg && xdg.startsWith('/') ? xdg : join(home, '.cache'), 'profcpu', 'symbols');
}

export interface MissRecord {
  /** When the server said it has no such file (ms since the epoch). */
  at: number;
  /** The server's answer, e.g. `HTTP 404`. */
  reason: string;
}

/** Why a file could not be added: it is not an ELF file, or not the one asked for. */
export class VerificationError extends ProfcpuError {}

export class SymbolCache {
  constructor(readonly dir: string) {}

  /** Where the verified debug file of `buildId` lives (whether or not it is there yet). */
  pathOf(buildId: string): string {
    checkBuildId(buildId);
    return join(this.dir, buildId.slice(0, 2), `${buildId.slice(2)}.debug`);
  }

  /** The verified debug file of `buildId`, if the cache has it. */
  async lookup(buildId: string): Promise<string | undefined> {
    const path = this.pathOf(buildId);
    try {
      return (await stat(path)).isFile() ? path : undefined;
    } catch {
      return undefined;
    }
  }

  /** A fresh path under `<dir>/tmp/` for a download in progress. */
  async tempPath(buildId: string): Promise<string> {
    const tmp = join(this.dir, 'tmp');
    await mkdir(tmp, { recursive: true }).catch((cause: unknown) => {
      throw this.writeError(cause);
    });
    return join(tmp, `${buildId}.${randomBytes(6).toString('hex')}.part`);
  }

  /** The error for a cache that cannot be written (permissions, full disk). */
  writeError(cause: unknown): ProfcpuError {
    return new ProfcpuError('IO', `cannot write to the symbol cache ${this.dir}: ${(cause as Error).message}`, {
      remedy: 'Free some space, or point profcpu at a writable folder with --cache-dir (or XDG_CACHE_HOME).',
      cause,
    });
  }

  /**
   * Verifies that the file at `tempPath` is an ELF file whose build-id is `buildId` and renames it into the cache.
   * On any failure the temporary file is deleted and a VerificationError says why.
   */
  async commit(tempPath: string, buildId: string): Promise<string> {
    const target = this.pathOf(buildId);
    try {
      let found: string | undefined;
      try {
        found = (await readElfFile(tempPath, 'the file received')).buildId;
      } catch (cause) {
        throw new VerificationError('SYMBOL_FETCH', (cause as Error).message, { cause });
      }
      if (found !== buildId)
        throw new VerificationError(
          'SYMBOL_FETCH',
          found
            ? `the file received has build-id ${found}, not ${buildId}`
            : `the file received has no build-id (expected ${buildId})`,
          { remedy: 'The server holds a wrong file under this key; tell its operator or remove it from the list.' },
        );
      try {
        await mkdir(join(this.dir, buildId.slice(0, 2)), { recursive: true });
        await rename(tempPath, target);
      } catch (cause) {
        throw this.writeError(cause);
      }
      return target;
    } finally {
      await rm(tempPath, { force: true });
    }
  }

  /** Remembers that `server` has no debug file for `buildId`. */
  async recordMiss(buildId: string, server: string, reason: string, now = Date.now()): Promise<void> {
    const misses = await this.misses(buildId);
    misses[server] = { at: now, reason };
    const dir = join(this.dir, 'misses');
    await mkdir(dir, { recursive: true });
    // Written whole to a temporary name and renamed, so concurrent runs never read half a record.
    const temp = join(dir, `.${buildId}.${randomBytes(6).toString('hex')}`);
    await writeFile(temp, `${JSON.stringify(misses)}\n`);
    await rename(temp, join(dir, `${buildId}.json`));
  }

  /** The remembered miss of `server` for `buildId`, if younger than `ttlMs`. */
  async recentMiss(buildId: string, server: string, ttlMs: number, now = Date.now()): Promise<MissRecord | undefined> {
    const miss = (await this.misses(buildId))[server];
    return miss && now - miss.at < ttlMs && miss.at <= now ? miss : undefined;
  }

  private async misses(buildId: string): Promise<Record<string, MissRecord>> {
    checkBuildId(buildId);
    try {
      const parsed: unknown = JSON.parse(await readFile(join(this.dir, 'misses', `${buildId}.json`), 'utf8'));
      const out: Record<string, MissRecord> = {};
      if (parsed && typeof parsed === 'object')
        for (const [server, value] of Object.entries(parsed as Record<string, unknown>)) {
          const v = value as Partial<MissRecord> | null;
          if (v && typeof v.at === 'number' && typeof v.reason === 'string')
            out[server] = { at: v.at, reason: v.reason };
        }
      return out;
    } catch {
      // No record yet, or an unreadable one: both mean "ask again".
      return {};
    }
  }

  /** Deletes downloads left in `<dir>/tmp/` by runs that died more than `olderThanMs` ago. */
  async removeStaleTemporaries(olderThanMs: number, now = Date.now()): Promise<number> {
    const tmp = join(this.dir, 'tmp');
    let removed = 0;
    let names: string[];
    try {
      names = await readdir(tmp);
    } catch {
      return 0;
    }
    for (const name of names) {
      const path = join(tmp, name);
      try {
        if (now - (await stat(path)).mtimeMs > olderThanMs) {
          await rm(path, { force: true });
          removed++;
        }
      } catch {
        // Removed by another run meanwhile.
      }
    }
    return removed;
  }
}

function checkBuildId(buildId: string): void {
  // The build-id becomes a path: refuse anything but hex so it can never climb out of the cache folder.
  if (!isBuildId(buildId))
    throw new ProfcpuError('BAD_INPUT', `${JSON.stringify(buildId)} is not a build-id`, {
      remedy: 'A build-id is an even number of lower-case hex digits, as `readelf -n` prints it.',
    });
}

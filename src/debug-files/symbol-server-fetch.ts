// A build-id in, a verified debug file in profcpu's cache out (or the reason there is none). Asks each symbol server
// in order; streams the body to a temporary file under a size cap, with a deadline for the answer, for every pause in
// the body and for the whole download, and a minimum average rate so a server trickling bytes fails early; follows
// a few redirects itself (same scheme only); a few retries for transient failures, and progress for large files;
// verifies the build-id before the file enters the cache (see symbol-cache.ts). Never throws for a server's fault:
// each one is an attempt with a reason in the result, and a warning. Concurrent requests for one build-id share one
// download.
import { open, rm, type FileHandle } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { ignoreWarnings, SkipCounter, type Warn } from '../diagnostics.js';
import { ProfcpuError } from '../error.js';
import { SymbolCache, VerificationError } from './symbol-cache.js';
import { debugFileUrl, type SymbolServer } from './symbol-server.js';

export interface SymbolFetchProgress {
  buildId: string;
  url: string;
  received: number;
  /** From Content-Length, when the server sent one. */
  total: number | undefined;
}

export interface SymbolFetchOptions {
  /** Servers to ask, in order (see symbolServerList); empty means offline: only the cache is used. */
  servers: readonly SymbolServer[];
  /** profcpu's symbol cache folder (see defaultSymbolCacheDir). */
  cacheDir: string;
  /** Time allowed for a server to answer with headers. Default 20 s. */
  answerTimeoutMs: number;
  /** Longest pause allowed inside a body. Default 30 s. */
  idleTimeoutMs: number;
  /** Longest time one download from one server may take in all, retries and redirects included. Default 10 min. */
  totalTimeoutMs: number;
  /** Lowest average rate (bytes per second since the answer) a body may fall to; 0 turns the rule off.
   * Default 16 KiB/s. */
  minBytesPerSecond: number;
  /** Time a body is given before the rate rule applies (slow start, a proxy filling its buffer). Default 30 s. */
  minRateGraceMs: number;
  /** Redirects followed for one request (same scheme only, see redirectTarget). Default 5. */
  maxRedirects: number;
  /** Extra attempts after a transient failure (network error, timeout, 5xx, 429, cut body). Default 2. */
  retries: number;
  /** Delay before the first retry, doubled for each next one. Default 500 ms. */
  retryDelayMs: number;
  /** Largest debug file accepted. Default 1 GiB (libcoreclr.so.dbg is a few hundred MB). */
  maxBytes: number;
  /** How long a 404 is remembered before the server is asked again. Default 24 h. */
  missTtlMs: number;
  /** Progress is reported each time this many more bytes arrived. Default 16 MiB. */
  progressEveryBytes: number;
  signal?: AbortSignal | undefined;
  warn?: Warn | undefined;
  progress?: ((p: SymbolFetchProgress) => void) | undefined;
}

export const symbolFetchDefaults = Object.freeze({
  answerTimeoutMs: 20_000,
  idleTimeoutMs: 30_000,
  // libcoreclr.so.dbg is a few hundred MB: at a slow 1 MB/s that is about 5 minutes; twice that bounds a server that
  // keeps sending just fast enough to pass the rate rule (the --download-timeout flag raises it for slower links).
  totalTimeoutMs: 10 * 60 * 1000,
  // Far below any link one would fetch hundreds of MB over (slow 3G gives hundreds of KiB/s), so only a server
  // trickling on purpose or a broken path stays under it: one byte every half second fails after the grace time
  // instead of holding a download for the whole deadline. At this rate the deadline would allow under 10 MB anyway.
  minBytesPerSecond: 16 << 10,
  // As long as the idle timeout: a body that started slowly gets as long as a body that paused once.
  minRateGraceMs: 30_000,
  // Real symbol servers redirect once or twice (to a CDN, a blob store); more is a loop or a game.
  maxRedirects: 5,
  retries: 2,
  retryDelayMs: 500,
  maxBytes: 1 << 30,
  missTtlMs: 24 * 60 * 60 * 1000,
  progressEveryBytes: 16 << 20,
});

export type AttemptOutcome = 'found' | 'not-found' | 'remembered-miss' | 'skipped' | 'failed' | 'rejected';

export interface SymbolFetchAttempt {
  server: string;
  url: string;
  outcome: AttemptOutcome;
  /** Why it was not found there: `HTTP 404`, `no answer within 20 s`, `build-id mismatch`... */
  reason?: string;
}

export interface SymbolFetchResult {
  buildId: string;
  /** cached: already in the cache; downloaded: fetched now; not-found: every server said so; failed: a server
   * failed and none had it; offline: no server to ask and not cached. */
  status: 'cached' | 'downloaded' | 'not-found' | 'failed' | 'offline';
  /** The verified debug file in the cache. */
  path?: string;
  /** The server it came from (downloaded only). */
  server?: string;
  bytes?: number;
  attempts: SymbolFetchAttempt[];
}

type Download = { kind: 'ok'; bytes: number } | { kind: 'missing'; reason: string } | Failure;
interface Failure {
  kind: 'failed';
  reason: string;
  transient: boolean;
  /** The server could not be reached at all: skip it for the rest of this run. */
  unreachable: boolean;
}

/** Fetches debug files for one run; owns the run's in-flight downloads and its list of unreachable servers. */
export class SymbolFetcher {
  private readonly options: SymbolFetchOptions;
  private readonly cache: SymbolCache;
  private readonly inFlight = new Map<string, Promise<SymbolFetchResult>>();
  private readonly unreachable = new Map<string, string>();
  private cleanup: Promise<number> | undefined;
  /** 404s by server: the first one is a warning, the rest are only counted (a distro's libraries all miss). */
  private readonly misses: SkipCounter;

  constructor(options: Partial<SymbolFetchOptions> & Pick<SymbolFetchOptions, 'servers' | 'cacheDir'>) {
    this.options = { ...symbolFetchDefaults, ...options };
    this.cache = new SymbolCache(this.options.cacheDir);
    this.misses = new SkipCounter(this.options.warn ?? ignoreWarnings);
  }

  /** The verified debug file for `buildId` (lower-case hex), from the cache or the first server that has it. */
  fetch(buildId: string): Promise<SymbolFetchResult> {
    let pending = this.inFlight.get(buildId);
    if (!pending) {
      pending = this.fetchOnce(buildId).finally(() => this.inFlight.delete(buildId));
      this.inFlight.set(buildId, pending);
    }
    return pending;
  }

  private async fetchOnce(buildId: string): Promise<SymbolFetchResult> {
    const warn = this.options.warn ?? ignoreWarnings;
    // Downloads left by runs that died; an hour without a write means nobody is still writing them.
    await (this.cleanup ??= this.cache.removeStaleTemporaries(60 * 60 * 1000));
    const cached = await this.cache.lookup(buildId);
    if (cached) return { buildId, status: 'cached', path: cached, attempts: [] };
    if (this.options.servers.length === 0) return { buildId, status: 'offline', attempts: [] };

    const attempts: SymbolFetchAttempt[] = [];
    for (const server of this.options.servers) {
      this.throwIfAborted();
      const url = debugFileUrl(server, buildId);
      const attempt = (outcome: AttemptOutcome, reason?: string) =>
        attempts.push({ server: server.url, url, outcome, ...(reason === undefined ? {} : { reason }) });
      const down = this.unreachable.get(server.url);
      if (down) {
        attempt('skipped', `unreachable earlier in this run (${down})`);
        continue;
      }
      const miss = await this.cache.recentMiss(buildId, server.url, this.options.missTtlMs);
      if (miss) {
        attempt('remembered-miss', `${miss.reason} at ${new Date(miss.at).toISOString()}`);
        continue;
      }
      const temp = await this.cache.tempPath(buildId);
      const result = await this.downloadWithRetries(url, temp, buildId).catch(async (error: unknown) => {
        await rm(temp, { force: true });
        throw error;
      });
      if (result.kind !== 'ok') await rm(temp, { force: true });
      if (result.kind === 'missing') {
        attempt('not-found', result.reason);
        this.misses.add(
          server.url,
          `symbol server ${server.url} has no debug file for ${buildId} (${result.reason}); further misses ` +
            'from it are not reported (expected for distro and source-built binaries on Microsoft’s server)',
        );
        await this.cache.recordMiss(buildId, server.url, result.reason);
        continue;
      }
      if (result.kind === 'failed') {
        attempt('failed', result.reason);
        if (result.unreachable) this.unreachable.set(server.url, result.reason);
        warn(`symbol server ${server.url}: ${result.reason} (fetching ${buildId})`);
        continue;
      }
      try {
        const path = await this.cache.commit(temp, buildId);
        attempt('found');
        return { buildId, status: 'downloaded', path, server: server.url, bytes: result.bytes, attempts };
      } catch (error) {
        if (!(error instanceof VerificationError)) throw error;
        attempt('rejected', error.message);
        warn(`symbol server ${server.url}: discarded ${url}: ${error.message}`);
      }
    }
    const failed = attempts.some((a) => a.outcome === 'failed' || a.outcome === 'rejected' || a.outcome === 'skipped');
    return { buildId, status: failed ? 'failed' : 'not-found', attempts };
  }

  /** `url` into `dest`, with retries for transient failures, all within one overall deadline. */
  private async downloadWithRetries(url: string, dest: string, buildId: string): Promise<Download> {
    const deadline = Date.now() + this.options.totalTimeoutMs;
    let result: Download = { kind: 'failed', reason: 'not tried', transient: false, unreachable: false };
    let made = 0;
    for (let attempt = 0; attempt <= this.options.retries; attempt++) {
      if (attempt > 0) {
        const delay = this.options.retryDelayMs * 2 ** (attempt - 1);
        // A retry that would start at or after the deadline could only fail on it.
        if (Date.now() + delay >= deadline) break;
        await sleep(delay, undefined, { signal: this.options.signal }).catch(() => this.throwIfAborted());
      }
      made++;
      result = await this.download(url, dest, buildId, deadline);
      if (result.kind !== 'failed' || !result.transient) return result;
    }
    if (result.kind === 'failed' && made > 1) result.reason = `${result.reason}, after ${made} attempts`;
    return result;
  }

  /** One GET of `url` into `dest` (created, or truncated), following redirects, until `deadline` (epoch ms). */
  private async download(url: string, dest: string, buildId: string, deadline: number): Promise<Download> {
    const timers = new DownloadTimers(deadline, this.options.totalTimeoutMs, this.options.signal);
    const file = await open(dest, 'w').catch((cause: unknown) => {
      throw this.cache.writeError(cause);
    });
    try {
      const answer = await this.answer(url, timers);
      if (!('response' in answer)) return answer;
      const { response } = answer;
      const at = answer.url === url ? '' : ` from ${answer.url}`;
      const total = contentLength(response);
      const refused = await this.refusal(response, at, total);
      if (refused) return refused;
      return await this.receive(response, file, timers, { buildId, url, total });
    } finally {
      timers.clear();
      await file.close();
    }
  }

  /** The answer to `url` once its redirects are followed, and the URL that gave it; or why none came. */
  private async answer(url: string, timers: DownloadTimers): Promise<{ response: Response; url: string } | Failure> {
    const { answerTimeoutMs, maxRedirects } = this.options;
    let current = url;
    for (let hops = 0; ; hops++) {
      timers.arm(answerTimeoutMs, () => `no answer within ${seconds(answerTimeoutMs)}`, true);
      let response: Response;
      try {
        // identity: fetch() would otherwise ask for gzip and decode it, and Content-Length would no longer
        // tell the size of what arrives. manual: fetch() would follow any redirect to any host and scheme.
        const headers = { 'user-agent': 'profcpu', 'accept-encoding': 'identity' };
        response = await fetch(current, { signal: timers.controller.signal, headers, redirect: 'manual' });
      } catch (cause) {
        this.throwIfAborted();
        return (
          timers.stopped ?? {
            kind: 'failed',
            reason: `cannot connect: ${describe(cause)}`,
            transient: true,
            unreachable: true,
          }
        );
      }
      if (!redirectStatuses.has(response.status)) return { response, url: current };
      await discard(response);
      // Not transient: the same request would be sent to the same place again.
      const refuse = (reason: string): Failure => ({ kind: 'failed', reason, transient: false, unreachable: false });
      if (hops === maxRedirects) return refuse(`more than ${maxRedirects} redirects (the last from ${current})`);
      const next = redirectTarget(current, response.headers.get('location'));
      if ('refused' in next) return refuse(`HTTP ${response.status} from ${current}: ${next.refused}`);
      current = next.url;
    }
  }

  /** Why an answer gives no debug file, known before its body: 404 or 410, another status, a file too large. */
  private async refusal(response: Response, at: string, total: number | undefined): Promise<Download | undefined> {
    if (response.status === 404 || response.status === 410) {
      await discard(response);
      return { kind: 'missing', reason: `HTTP ${response.status}${at}` };
    }
    if (response.status !== 200) {
      await discard(response);
      const transient = response.status >= 500 || response.status === 429 || response.status === 408;
      return { kind: 'failed', reason: `HTTP ${response.status}${at}`, transient, unreachable: false };
    }
    if (total !== undefined && total > this.options.maxBytes) {
      await discard(response);
      return tooLarge(total, this.options.maxBytes);
    }
    return undefined;
  }

  /** The body of `response` into `file`, under the idle and rate rules and the size cap, its progress reported. */
  private async receive(
    response: Response,
    file: FileHandle,
    timers: DownloadTimers,
    { buildId, url, total }: { buildId: string; url: string; total: number | undefined },
  ): Promise<Download> {
    const { idleTimeoutMs, maxBytes, progressEveryBytes, progress, minBytesPerSecond, minRateGraceMs } = this.options;
    const stalled = () => `body stalled for ${seconds(idleTimeoutMs)} after ${timers.received} bytes`;
    timers.arm(idleTimeoutMs, stalled);
    if (minBytesPerSecond > 0) timers.watchRate(minBytesPerSecond, minRateGraceMs);
    let nextProgress = progressEveryBytes;
    try {
      for await (const chunk of response.body ?? []) {
        timers.arm(idleTimeoutMs, stalled);
        timers.received += chunk.byteLength;
        // Leaving the loop cancels the body; aborting here would make that cancel throw.
        if (timers.received > maxBytes) break;
        await file.write(chunk).catch((cause: unknown) => {
          throw this.cache.writeError(cause);
        });
        if (timers.received >= nextProgress) {
          nextProgress += progressEveryBytes;
          progress?.({ buildId, url, received: timers.received, total });
        }
      }
    } catch (cause) {
      this.throwIfAborted();
      if (cause instanceof ProfcpuError) throw cause;
      const reason = `body cut after ${timers.received} bytes: ${describe(cause)}`;
      return timers.stopped ?? { kind: 'failed', reason, transient: true, unreachable: false };
    }
    const { received } = timers;
    if (received > maxBytes) return tooLarge(received, maxBytes);
    if (total !== undefined && received !== total)
      return {
        kind: 'failed',
        reason: `body cut after ${received} of ${total} bytes`,
        transient: true,
        unreachable: false,
      };
    if (total !== undefined && total >= progressEveryBytes) progress?.({ buildId, url, received, total });
    return { kind: 'ok', bytes: received };
  }

  private throwIfAborted(): void {
    if (this.options.signal?.aborted)
      throw new ProfcpuError('ABORTED', 'symbol download interrupted', { cause: this.options.signal.reason });
  }
}

/**
 * The timers of one download (the answer or the pause in a body, the average rate, the overall deadline) and the
 * bytes received so far, which their reasons tell. The first to fire stops the request and is the reason given.
 */
class DownloadTimers {
  readonly controller = new AbortController();
  received = 0;
  /** Why a timer ended the request; the first one to fire wins. */
  stopped: Failure | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private rateTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly deadlineTimer: ReturnType<typeof setTimeout>;
  private readonly onAbort = () => this.controller.abort();

  constructor(
    deadline: number,
    totalTimeoutMs: number,
    private readonly signal: AbortSignal | undefined,
  ) {
    this.deadlineTimer = later(
      () => this.stop(`not finished within ${seconds(totalTimeoutMs)} (${this.received} bytes received)`, false),
      deadline - Date.now(),
    );
    signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  stop(reason: string, transient: boolean, unreachable = false): void {
    this.stopped ??= { kind: 'failed', reason, transient, unreachable };
    this.controller.abort();
  }

  /** (Re)starts the timer for the answer or the next bytes of the body. */
  arm(ms: number, reason: () => string, unreachable = false): void {
    clearTimeout(this.timer);
    this.timer = later(() => this.stop(reason(), true, unreachable), ms);
  }

  /**
   * The idle timer alone lets a server keep a download alive for ever with a byte now and then: checked at the moment
   * the average since the answer would fall under the floor, given what has arrived by then.
   */
  watchRate(minBytesPerSecond: number, minRateGraceMs: number): void {
    const bodyStart = Date.now();
    const checkRate = () => {
      const elapsed = Date.now() - bodyStart;
      const due = Math.max(minRateGraceMs, (this.received / minBytesPerSecond) * 1000);
      if (elapsed < due) this.rateTimer = later(checkRate, due - elapsed);
      else
        this.stop(
          `too slow: ${this.received} bytes in ${seconds(elapsed)}, under the minimum of ${minBytesPerSecond} bytes/s`,
          false,
        );
    };
    this.rateTimer = later(checkRate, minRateGraceMs);
  }

  clear(): void {
    clearTimeout(this.timer);
    clearTimeout(this.rateTimer);
    clearTimeout(this.deadlineTimer);
    this.signal?.removeEventListener('abort', this.onAbort);
  }
}

/** The body's size from Content-Length, when the server sent one for the bytes as they arrive (not encoded). */
function contentLength(response: Response): number | undefined {
  const lengthHeader = response.headers.get('content-length');
  const encoded = (response.headers.get('content-encoding') ?? 'identity') !== 'identity';
  return lengthHeader !== null && /^\d+$/.test(lengthHeader) && !encoded ? Number(lengthHeader) : undefined;
}

function tooLarge(n: number, maxBytes: number): Failure {
  return {
    kind: 'failed',
    reason: `file larger than the ${maxBytes}-byte limit (${n} bytes)`,
    transient: false,
    unreachable: false,
  };
}

/** Drops a body not wanted; a timer that aborted the request meanwhile is already the reason given. */
async function discard(response: Response): Promise<void> {
  await response.body?.cancel().catch(() => {});
}

const redirectStatuses = new Set([301, 302, 303, 307, 308]);

/**
 * Where a redirect from `from` may lead: the Location resolved against `from`, or why it is refused. Same scheme
 * only, and only http: or https:. An https: server must not send the download over cleartext, and an http: one may
 * not move it to https: either: the user chose the server's URL, and a server that wants https: is given as such
 * (the refusal says so). Other schemes (file:, ftp:, data:) and URLs carrying credentials are never followed.
 */
export function redirectTarget(from: string, location: string | null): { url: string } | { refused: string } {
  if (location === null || location.trim() === '') return { refused: 'redirect without a Location' };
  let target: URL;
  try {
    target = new URL(location, from);
  } catch {
    return { refused: `redirect to an invalid URL ${JSON.stringify(location)}` };
  }
  const scheme = new URL(from).protocol;
  if (target.protocol !== 'http:' && target.protocol !== 'https:')
    return { refused: `redirect to ${target.protocol} refused (only http: and https: are followed)` };
  if (target.protocol !== scheme)
    return {
      refused:
        `redirect to ${target.href} refused: it changes the scheme from ${scheme} to ${target.protocol}` +
        (target.protocol === 'https:' ? ' (give the server’s https: URL instead)' : ''),
    };
  if (target.username !== '' || target.password !== '')
    return { refused: 'redirect to a URL with credentials refused' };
  return { url: target.href };
}

/** setTimeout that takes any delay: past ~24.8 days Node fires at once instead (and warns). */
function later(f: () => void, ms: number): ReturnType<typeof setTimeout> {
  return setTimeout(f, Math.min(Math.max(0, ms), 2 ** 31 - 1));
}

function seconds(ms: number): string {
  return `${Math.round(ms / 100) / 10} s`;
}

/** fetch() hides the socket error in `cause`: `fetch failed` alone would tell the user nothing. */
function describe(error: unknown): string {
  const parts: string[] = [];
  for (let e = error, depth = 0; e instanceof Error && depth < 4; e = e.cause, depth++) {
    const code = (e as { code?: unknown }).code;
    parts.push(typeof code === 'string' && !e.message.includes(code) ? `${e.message} (${code})` : e.message);
  }
  return parts.join(': ') || String(error);
}

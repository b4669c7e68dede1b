// `profcpu watch`'s loop: rules in, runs in the watch folder out, one log line per trigger and per action. Every
// `pollMs` it reads the CPU ticks of the processes its rules watch (/proc/PID/stat), every `scanMs` it looks for
// processes again (a restarted app is a new process: its CPU window starts afresh), and it evaluates the triggers:
// - cpu: the average over the rule's window at or above the threshold fires once, then the rule re-arms for that
//   process only after the average fell below it (one action per episode of high CPU, however long it lasts);
// - schedule: every period; - demand: SIGUSR1 (demand()), or a file named after the rule dropped in `triggers/`.
// A trigger acts unless a limit says no (the rule's lifetime, its cool-down, its actions per sliding window); actions
// run one at a time, each into a run folder of its own, recorded in index.json/index.html, and retention applies after
// each. `stop` ends the watch after the action under way finished (a profile stops recording early and is still
// post-processed); `signal` abandons that action and its folder is removed.
import { lchown, lstat, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Warn } from '../diagnostics.js';
import { isProfcpuError } from '../error.js';
import { OutputFolder } from '../files/output-folder.js';
import type { ActionRunners } from './actions.js';
import { CpuWindow, cpuQuotaCores, cpuTicks } from './cpu.js';
import { matchesFilters, ProcessScanner, type SeenProcess } from './processes.js';
import { folderBytes, RunIndex, type Owner, type RunEntry } from './run-index.js';
import type { Rule, WatchRules } from './rules.js';

export interface WatchOptions {
  rules: WatchRules;
  /** The watch folder: one folder per run, index.json, index.html, triggers/. */
  dir: string;
  /** How often the watched processes' CPU is read, in ms. */
  pollMs: number;
  /** How often processes are looked for again (new, restarted, gone), in ms. */
  scanMs: number;
  procRoot: string;
  /** Who the watch folder, its index and triggers folder are given to (runs are given by collect). Default: as made. */
  owner?: Owner;
}

export const watchDefaults = Object.freeze({
  // One read of /proc/PID/stat per watched process a second: 0.2-0.4 % of a core idle (npm run bench watch).
  pollMs: 1000,
  // A restarted app is found within 5 s; a scan reads /proc/PID/stat of every visible process.
  scanMs: 5000,
  procRoot: '/proc',
});

/** The folder in the watch folder where a file named after a rule triggers it. */
export const triggersFolder = 'triggers';

export interface WatchContext {
  runners: ActionRunners;
  /** Aborting ends the watch once the action under way is finished. */
  stop: AbortSignal;
  /** Aborting abandons the action under way (its folder is removed) and ends the watch. */
  signal: AbortSignal;
  /** One line per trigger, per action, per process appearing or ending. */
  log: (line: string) => void;
  warn: Warn;
  /** The actions' progress lines (collect's). */
  info: (message: string) => void;
  now?: () => Date;
}

export interface WatchSummary {
  runs: number;
  /** Why the watch ended. */
  end: 'stopped' | 'aborted' | 'rules expired';
}

/** A process as one rule watches it. */
interface Watched {
  seen: SeenProcess;
  window?: CpuWindow;
  armed: boolean;
  quota?: { cores: number; source: string };
}

interface RuleState {
  rule: Rule;
  processes: Map<string, Watched>;
  actedAt: number[];
  cooldownUntil: number;
  nextScheduleMs?: number;
  demanded: boolean;
  expired: boolean;
}

interface Fired {
  state: RuleState;
  watched: Watched;
  reason: string;
  figures: Record<string, number | string>;
}

/** Processes a rule watches at most (a filter matching every process on a host must not grow without bound). */
const maxProcessesPerRule = 64;
const maxTriggerFiles = 100;

const id = (p: SeenProcess) => `${p.pid}:${p.startTicks}`;
const describe = (p: SeenProcess) => `${p.pid} (${p.info?.cmdline.join(' ').slice(0, 80) ?? '?'})`;

export class Watcher {
  private readonly states: RuleState[];
  private readonly scanner: ProcessScanner;
  private readonly startedMs: number;
  private runs = 0;
  private demandedAll = false;
  /** The triggers folder's inode and mtime when last listed. */
  private triggersSeen: string | undefined;

  constructor(
    private readonly options: WatchOptions,
    private readonly context: WatchContext,
  ) {
    this.startedMs = this.nowMs();
    this.scanner = new ProcessScanner({ procRoot: options.procRoot });
    this.states = options.rules.rules.map((rule) => ({
      rule,
      processes: new Map(),
      actedAt: [],
      cooldownUntil: 0,
      ...(rule.trigger.type === 'schedule' && { nextScheduleMs: this.startedMs + rule.trigger.everyMs }),
      demanded: false,
      expired: false,
    }));
  }

  /** Triggers every rule whose trigger is `demand`, at the next poll (SIGUSR1). */
  demand(): void {
    this.demandedAll = true;
  }

  async run(): Promise<WatchSummary> {
    const { stop, signal, log } = this.context;
    const folder = await OutputFolder.open(this.options.dir, { create: true });
    try {
      await (await folder.folder(triggersFolder, { create: true })).close();
      const owner = this.options.owner;
      if (owner)
        for (const path of [folder.path, join(folder.path, triggersFolder)])
          await lchown(path, owner.uid, owner.gid).catch((e: unknown) =>
            this.context.warn(`cannot give ${path} to uid ${owner.uid}: ${String(e)}`),
          );
      const index = await RunIndex.open(folder, owner);
      await index.save();
      log(
        `watching with ${this.states.length} rule(s) into ${folder.path}: ${this.states.map((s) => describeRule(s.rule)).join('; ')}`,
      );
      let nextScan = 0;
      while (!stop.aborted && !signal.aborted) {
        const now = this.nowMs();
        if (this.expire(now)) return { runs: this.runs, end: 'rules expired' };
        if (now >= nextScan) {
          await this.scan();
          nextScan = now + this.options.scanMs;
        }
        await this.sample(now);
        await this.readTriggerFiles(folder);
        for (const fired of this.evaluate(now)) {
          if (stop.aborted || signal.aborted) break;
          await this.act(fired, folder, index);
        }
        await sleep(this.options.pollMs, undefined, { signal: stop }).catch(() => undefined);
      }
      return { runs: this.runs, end: signal.aborted ? 'aborted' : 'stopped' };
    } finally {
      await folder.close();
    }
  }

  private nowMs(): number {
    return (this.context.now?.() ?? new Date()).getTime();
  }

  /** Marks rules past their lifetime; true when none is left. */
  private expire(now: number): boolean {
    for (const state of this.states) {
      const lifetime = state.rule.limits.lifetimeMs;
      if (!state.expired && lifetime !== undefined && now - this.startedMs >= lifetime) {
        state.expired = true;
        this.context.log(`rule ${state.rule.name}: lifetime of ${seconds(lifetime)} over, the rule ends`);
      }
    }
    return this.states.every((s) => s.expired);
  }

  private async scan(): Promise<void> {
    const seen = await this.scanner.scan(this.states.filter((s) => !s.expired).map((s) => s.rule.filters));
    for (const state of this.states.filter((s) => !s.expired)) {
      const matching = seen.filter((p) => p.info && matchesFilters(state.rule.filters, p.info));
      const ids = new Set(matching.map(id));
      for (const [key, watched] of state.processes)
        if (!ids.has(key)) this.forget(state, key, `process ${describe(watched.seen)} is gone`);
      for (const process of matching) {
        if (state.processes.has(id(process)) || state.processes.size >= maxProcessesPerRule) continue;
        const watched: Watched = { seen: process, armed: true };
        if (state.rule.trigger.type === 'cpu') {
          watched.window = new CpuWindow(state.rule.trigger.forMs);
          if (state.rule.trigger.of === 'quota')
            watched.quota = await cpuQuotaCores(process.pid, { procRoot: this.options.procRoot });
        }
        state.processes.set(id(process), watched);
        this.context.log(
          `rule ${state.rule.name}: watching process ${describe(process)}${watched.quota ? `, CPU quota ${watched.quota.cores} cores (${watched.quota.source})` : ''}`,
        );
      }
    }
  }

  private forget(state: RuleState, key: string, why: string): void {
    if (state.processes.delete(key)) this.context.log(`rule ${state.rule.name}: ${why}`);
  }

  /** Reads the CPU ticks of every process a cpu rule watches (once per process and poll). */
  private async sample(now: number): Promise<void> {
    const read = new Map<number, Awaited<ReturnType<typeof cpuTicks>>>();
    for (const state of this.states.filter((s) => !s.expired && s.rule.trigger.type === 'cpu')) {
      for (const [key, watched] of state.processes) {
        const pid = watched.seen.pid;
        if (!read.has(pid)) read.set(pid, await cpuTicks(pid, { procRoot: this.options.procRoot }));
        const ticks = read.get(pid);
        if (!ticks || ticks.startTicks !== watched.seen.startTicks) {
          this.forget(state, key, `process ${describe(watched.seen)} is gone`);
          continue;
        }
        watched.window?.add(now, ticks.ticks);
      }
    }
  }

  /** A file named after a rule in triggers/ triggers that rule; the file is removed. */
  private async readTriggerFiles(folder: OutputFolder): Promise<void> {
    // The folder is listed only when it changed: one stat a poll while nothing is dropped there.
    const changed = await lstat(join(folder.path, triggersFolder), { bigint: true }).then(
      (s) => `${s.ino}:${s.mtimeNs}`,
      () => undefined,
    );
    if (changed !== undefined && changed === this.triggersSeen) return;
    this.triggersSeen = changed;
    const names = await folder.list(triggersFolder, maxTriggerFiles).catch(() => [] as string[]);
    for (const name of names) {
      await folder.remove(`${triggersFolder}/${name}`).catch(() => undefined);
      const state = this.states.find((s) => s.rule.name === name);
      if (state && !state.expired) state.demanded = true;
      else this.context.warn(`watch: ${triggersFolder}/${name} names no rule${state ? ' still alive' : ''}: removed`);
    }
  }

  private evaluate(now: number): Fired[] {
    const fired: Fired[] = [];
    const all = this.demandedAll;
    this.demandedAll = false;
    for (const state of this.states.filter((s) => !s.expired)) {
      const { trigger } = state.rule;
      const demanded = state.demanded || (all && trigger.type === 'demand');
      state.demanded = false;
      if (demanded) {
        if (state.processes.size === 0) this.context.log(`rule ${state.rule.name}: on demand, but no process matches`);
        for (const watched of state.processes.values())
          fired.push({ state, watched, reason: 'on demand', figures: {} });
        continue;
      }
      if (trigger.type === 'schedule' && state.nextScheduleMs !== undefined && now >= state.nextScheduleMs) {
        while (state.nextScheduleMs <= now) state.nextScheduleMs += trigger.everyMs;
        for (const watched of state.processes.values())
          fired.push({ state, watched, reason: `every ${seconds(trigger.everyMs)}`, figures: {} });
      }
      if (trigger.type !== 'cpu') continue;
      for (const watched of state.processes.values()) {
        const share = watched.window?.share();
        if (share === undefined) continue;
        const scale = trigger.of === 'quota' ? (watched.quota?.cores ?? 1) : 1;
        const percent = (100 * share) / scale;
        if (percent < trigger.above) {
          watched.armed = true;
          continue;
        }
        if (!watched.armed) continue;
        watched.armed = false;
        const of = trigger.of === 'quota' ? `of the CPU quota (${scale} cores)` : 'of a core';
        fired.push({
          state,
          watched,
          reason: `CPU ${percent.toFixed(0)}% ${of} over ${seconds(trigger.forMs)}, at or above ${trigger.above}%`,
          figures: {
            cpuPercent: Number(percent.toFixed(1)),
            cores: Number(share.toFixed(3)),
            windowSeconds: trigger.forMs / 1000,
          },
        });
      }
    }
    return fired;
  }

  /** Why the rule may not act now, or undefined. */
  private refusal(state: RuleState, now: number): string | undefined {
    const { limits } = state.rule;
    if (now < state.cooldownUntil) return `cooling down until ${new Date(state.cooldownUntil).toISOString()}`;
    state.actedAt = state.actedAt.filter((t) => t > now - limits.windowMs);
    if (state.actedAt.length >= limits.maxActions)
      return `limit reached: ${limits.maxActions} action(s) in ${seconds(limits.windowMs)}`;
    return undefined;
  }

  private async act(fired: Fired, folder: OutputFolder, index: RunIndex): Promise<void> {
    const { state, watched, reason } = fired;
    const { rule } = state;
    const { log } = this.context;
    const refused = this.refusal(state, this.nowMs());
    log(
      `rule ${rule.name}: trigger: process ${describe(watched.seen)}: ${reason}${refused ? `; skipped, ${refused}` : ''}`,
    );
    if (refused) return;
    state.actedAt.push(this.nowMs());
    for (const action of rule.actions) {
      if (this.context.stop.aborted || this.context.signal.aborted) break;
      await this.runAction(fired, action, folder, index);
    }
    state.cooldownUntil = this.nowMs() + rule.limits.cooldownMs;
    // The next trigger needs a whole window of its own, after the action.
    watched.window?.clear();
  }

  private async runAction(fired: Fired, action: Rule['actions'][number], folder: OutputFolder, index: RunIndex) {
    const { log, signal, stop, warn, info } = this.context;
    const { rule } = fired.state;
    const target = fired.watched.seen.info!;
    const started = this.context.now?.() ?? new Date();
    const runId = uniqueId(index, `${stamp(started)}_${rule.name}_${target.pid}_${action.kind}`);
    const dir = join(folder.path, runId);
    const entry: RunEntry = {
      id: runId,
      rule: rule.name,
      action: action.kind,
      target: { pid: target.pid, comm: target.comm, commandLine: target.cmdline.join(' ').slice(0, 512) },
      trigger: { type: rule.trigger.type, reason: fired.reason, figures: fired.figures },
      startedAt: started.toISOString(),
      status: 'running',
    };
    index.add(entry);
    await index.save();
    this.runs++;
    log(`rule ${rule.name}: ${action.kind} of process ${target.pid} into ${runId}`);
    const runner = this.context.runners[action.kind];
    try {
      if (!runner) throw new Error(`no ${action.kind} action in this version of profcpu`);
      const outcome = await runner({ action, target, dir, id: runId }, { stop, signal, warn, info });
      Object.assign(entry, {
        status: 'done',
        summary: outcome.summary,
        figures: outcome.figures,
        links: outcome.links,
      });
      log(`rule ${rule.name}: ${action.kind} done: ${outcome.summary} (${runId})`);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (signal.aborted || isProfcpuError(error, 'ABORTED')) {
        await rm(dir, { recursive: true, force: true });
        Object.assign(entry, { status: 'discarded', summary: 'abandoned when the watch was aborted; folder removed' });
        log(`rule ${rule.name}: ${action.kind} abandoned, ${runId} removed`);
      } else {
        Object.assign(entry, { status: 'failed', summary: message });
        log(`rule ${rule.name}: ${action.kind} failed: ${message}`);
      }
    }
    entry.endedAt = (this.context.now?.() ?? new Date()).toISOString();
    entry.bytes = await folderBytes(dir);
    const removed = await index.applyRetention(this.options.rules.retention, this.context.now?.() ?? new Date());
    if (removed.length > 0) log(`retention: removed ${removed.join(', ')}`);
    await index.save();
  }
}

function describeRule(rule: Rule): string {
  const t = rule.trigger;
  const when =
    t.type === 'cpu'
      ? `CPU ≥ ${t.above}% of ${t.of === 'quota' ? 'the quota' : 'a core'} over ${seconds(t.forMs)}`
      : t.type === 'schedule'
        ? `every ${seconds(t.everyMs)}`
        : 'on demand';
  return `${rule.name}: ${when} → ${rule.actions.map((a) => a.kind).join(', ')}`;
}

function seconds(ms: number): string {
  return ms % 3_600_000 === 0 ? `${ms / 3_600_000} h` : ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`;
}

const pad = (n: number) => String(n).padStart(2, '0');

/** `YYYYMMDD-HHMMSS` in UTC: run folders sort by time. */
function stamp(date: Date): string {
  return (
    `${date.getUTCFullYear()}${pad(date.getUTCMonth() + 1)}${pad(date.getUTCDate())}-` +
    `${pad(date.getUTCHours())}${pad(date.getUTCMinutes())}${pad(date.getUTCSeconds())}`
  );
}

function uniqueId(index: RunIndex, base: string): string {
  const taken = new Set(index.entries.map((e) => e.id));
  let candidate = base;
  for (let n = 2; taken.has(candidate); n++) candidate = `${base}-${n}`;
  return candidate;
}

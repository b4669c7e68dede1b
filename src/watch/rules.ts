// `profcpu watch` rules: a JSON or YAML document (or the flags of the simple case) in, validated Rules out. A rule
// says, in dotnet-monitor's terms, which processes it watches (filters), when it acts (a trigger: CPU above a share of
// a core or of the container's quota over a sliding window, a schedule, or on demand), what it does (actions: a CPU
// profile, a dump) and how often at most (limits). Validation is strict: an unknown field, a wrong type or a value out
// of range is an error naming the field (`rules[0].trigger.for`), so a typo never silently means a default.
import { parse as parseYaml } from 'yaml';
import { ProfcpuError } from '../error.js';
import type { UnwindRequest } from '../collect/unwind-choice.js';
import { minBlockMicroseconds } from '../postprocess/offcpu-outputs.js';

export interface Filters {
  /** A process name as `profcpu ps` and --name know it: comm, executable base name, a .NET app's dll name. */
  name?: string;
  /** A substring of the command line (its arguments joined by spaces). */
  commandLine?: string;
  /** Only processes of this runtime. Default: dotnet when no other filter is given. */
  runtime?: 'dotnet' | 'node' | 'other';
  /** This PID only (as profcpu sees it). */
  pid?: number;
}

export type Trigger =
  | {
      type: 'cpu';
      /** Percent of one core (of: core) or of the container's CPU quota (of: quota), e.g. 80. */
      above: number;
      /** The sliding window the average is taken over, in ms. */
      forMs: number;
      of: 'core' | 'quota';
    }
  | {
      type: 'schedule';
      /** Act every this many ms, the first time one period after the watch began. */ everyMs: number;
    }
  | { type: 'demand' };

export type Action =
  | {
      kind: 'profile';
      /** Seconds recorded. */
      durationSeconds: number;
      frequency: number;
      /** collect's --unwind, when the rule sets it (collect's default otherwise). */
      unwind?: UnwindRequest;
      /** collect's --off-cpu: where the threads waited too. Default false. */
      offCpu?: boolean;
      /** collect's --min-block, in microseconds, with offCpu. Default collect's. */
      minBlockUs?: number;
    }
  | { kind: 'dump'; /** full, heap, mini, triage (dotnet-dump's). */ type: string };

export interface Limits {
  /** Actions at most within `windowMs` (sliding). */
  maxActions: number;
  windowMs: number;
  /** Time after an action ends during which the rule does not act again, in ms. */
  cooldownMs: number;
  /** How long the rule lives after the watch began, in ms; undefined: as long as the watch. */
  lifetimeMs?: number;
}

export interface Rule {
  name: string;
  filters: Filters;
  trigger: Trigger;
  actions: Action[];
  limits: Limits;
}

export interface Retention {
  /** Runs kept at most; the oldest are removed first. */
  maxRuns: number;
  /** Bytes of runs kept at most (on disk, as du counts). */
  maxBytes: number;
}

export interface WatchRules {
  rules: Rule[];
  retention: Retention;
}

/** Each default, documented: what a rule or the document gets when it leaves the field out. */
export const ruleDefaults = Object.freeze({
  /** A profile records 20 s at 99 Hz. */
  profile: { durationSeconds: 20, frequency: 99 },
  /** A CPU trigger compares with one core. */
  of: 'core' as const,
  /** 5 actions an hour, 1 min apart at least. */
  limits: { maxActions: 5, windowMs: 3_600_000, cooldownMs: 60_000 },
  /** 20 runs and 2 GiB kept. */
  retention: { maxRuns: 20, maxBytes: 2 * 1024 ** 3 },
});

/** Dump types the dump action will take (dotnet-dump's): validated now, so rules written today stay valid. */
export const dumpTypes = ['full', 'heap', 'mini', 'triage'] as const;

/** Which action kinds this build can run; the others are rejected by validation with `why`. */
export interface ActionAvailability {
  profile: true;
  dump: true | { why: string };
}

/** What validation assumes when not told: profile only (the watch command says it runs dumps too). */
export const defaultAvailability: ActionAvailability = {
  profile: true,
  dump: { why: 'the dump action is not available here (profile is)' },
};

const maxRules = 64;
const maxActionsPerRule = 8;
/** Rules files are read up to this size: a rules file is a few hundred bytes. */
export const maxRulesFileBytes = 1 << 20;

/** A rules error naming the field, as a usage error (exit 2). */
export function rulesError(field: string, message: string): ProfcpuError {
  return new ProfcpuError('USAGE', `rules: ${field}: ${message}`, {
    remedy: 'Fix the rules file (docs/watch.md, "Rules files", shows every field), or see `profcpu watch --help`.',
  });
}

const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `30s`, `5m`, `1h`, `500ms`, `2d`, or a number of seconds, to ms. */
export function parseDuration(value: unknown, field: string): number {
  let ms: number | undefined;
  if (typeof value === 'number') ms = value * 1000;
  else if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(value);
    if (match) ms = Number(match[1]) * units[match[2] ?? 's']!;
  }
  if (ms === undefined || !Number.isFinite(ms) || ms <= 0)
    throw rulesError(
      field,
      `${JSON.stringify(value)} is not a duration (a number of seconds, or 500ms, 30s, 5m, 1h, 2d)`,
    );
  return Math.round(ms);
}

const byteUnits: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1e3,
  kb: 1e3,
  kib: 1024,
  m: 1e6,
  mb: 1e6,
  mib: 1024 ** 2,
  g: 1e9,
  gb: 1e9,
  gib: 1024 ** 3,
  t: 1e12,
  tb: 1e12,
  tib: 1024 ** 4,
};

/** `500MiB`, `2GB`, `1g`, or a number of bytes. */
export function parseBytes(value: unknown, field: string): number {
  let bytes: number | undefined;
  if (typeof value === 'number') bytes = value;
  else if (typeof value === 'string') {
    const match = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(value);
    const unit = match ? byteUnits[match[2]!.toLowerCase()] : undefined;
    if (match && unit !== undefined) bytes = Number(match[1]) * unit;
  }
  if (bytes === undefined || !Number.isFinite(bytes) || bytes <= 0)
    throw rulesError(field, `${JSON.stringify(value)} is not a size (bytes, or 500MiB, 2GB, 1GiB)`);
  return Math.floor(bytes);
}

type Json = Record<string, unknown>;

function object(value: unknown, field: string, known: readonly string[]): Json {
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw rulesError(field, `must be an object, not ${describe(value)}`);
  for (const key of Object.keys(value))
    if (!known.includes(key))
      throw rulesError(`${field}.${key}`.replace(/^\./, ''), `unknown field (known: ${known.join(', ')})`);
  return value as Json;
}

function describe(value: unknown): string {
  return value === null ? 'null' : Array.isArray(value) ? 'a list' : `${typeof value} ${JSON.stringify(value)}`;
}

function string(value: unknown, field: string, max = 256): string {
  if (typeof value !== 'string' || value === '' || value.length > max)
    throw rulesError(field, `must be a non-empty string of ${max} characters at most, not ${describe(value)}`);
  return value;
}

function number(value: unknown, field: string, range: { min: number; max: number; integer?: boolean }): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < range.min || value > range.max)
    throw rulesError(field, `must be a number from ${range.min} to ${range.max}, not ${describe(value)}`);
  if (range.integer && !Number.isInteger(value)) throw rulesError(field, `must be a whole number, not ${value}`);
  return value;
}

function oneOf<T extends string>(value: unknown, field: string, choices: readonly T[]): T {
  if (typeof value !== 'string' || !(choices as readonly string[]).includes(value))
    throw rulesError(field, `must be one of ${choices.join(', ')}, not ${describe(value)}`);
  return value as T;
}

function filters(value: unknown, field: string): Filters {
  if (value === undefined) return { runtime: 'dotnet' };
  const raw = object(value, field, ['name', 'commandLine', 'runtime', 'pid']);
  const result: Filters = {};
  if (raw['name'] !== undefined) result.name = string(raw['name'], `${field}.name`);
  if (raw['commandLine'] !== undefined) result.commandLine = string(raw['commandLine'], `${field}.commandLine`, 4096);
  if (raw['runtime'] !== undefined)
    result.runtime = oneOf(raw['runtime'], `${field}.runtime`, ['dotnet', 'node', 'other'] as const);
  if (raw['pid'] !== undefined)
    result.pid = number(raw['pid'], `${field}.pid`, { min: 1, max: 2 ** 22, integer: true });
  if (Object.keys(result).length === 0) result.runtime = 'dotnet';
  return result;
}

function trigger(value: unknown, field: string): Trigger {
  const type = oneOf(object(value, field, ['type', 'above', 'for', 'of', 'every'])['type'], `${field}.type`, [
    'cpu',
    'schedule',
    'demand',
  ] as const);
  if (type === 'cpu') {
    const raw = object(value, field, ['type', 'above', 'for', 'of']);
    if (raw['above'] === undefined)
      throw rulesError(`${field}.above`, 'is required for a cpu trigger (percent, e.g. 80)');
    if (raw['for'] === undefined) throw rulesError(`${field}.for`, 'is required for a cpu trigger (e.g. 30s)');
    const forMs = parseDuration(raw['for'], `${field}.for`);
    if (forMs < 1000 || forMs > 86_400_000) throw rulesError(`${field}.for`, 'must be from 1s to 1d');
    return {
      type,
      above: number(raw['above'], `${field}.above`, { min: 1, max: 100_000 }),
      forMs,
      of: raw['of'] === undefined ? ruleDefaults.of : oneOf(raw['of'], `${field}.of`, ['core', 'quota'] as const),
    };
  }
  if (type === 'schedule') {
    const raw = object(value, field, ['type', 'every']);
    if (raw['every'] === undefined) throw rulesError(`${field}.every`, 'is required for a schedule trigger (e.g. 1h)');
    const everyMs = parseDuration(raw['every'], `${field}.every`);
    if (everyMs < 10_000) throw rulesError(`${field}.every`, 'must be 10s or more');
    return { type, everyMs };
  }
  object(value, field, ['type']);
  return { type };
}

function action(value: unknown, field: string, availability: ActionAvailability): Action {
  const raw = object(value, field, ['kind', 'duration', 'frequency', 'unwind', 'offCpu', 'minBlock', 'type']);
  const kind = oneOf(raw['kind'], `${field}.kind`, ['profile', 'dump'] as const);
  if (kind === 'profile') {
    object(value, field, ['kind', 'duration', 'frequency', 'unwind', 'offCpu', 'minBlock']);
    if (raw['offCpu'] !== undefined && typeof raw['offCpu'] !== 'boolean')
      throw rulesError(`${field}.offCpu`, `${JSON.stringify(raw['offCpu'])} is not true or false`);
    const minBlockUs = raw['minBlock'] === undefined ? undefined : minBlockMicroseconds(String(raw['minBlock']));
    if (raw['minBlock'] !== undefined && (minBlockUs === undefined || raw['offCpu'] !== true))
      throw rulesError(
        `${field}.minBlock`,
        minBlockUs === undefined
          ? `${JSON.stringify(raw['minBlock'])} is not a time (500us, 1ms; a number is microseconds)`
          : 'goes with offCpu: true',
      );
    const unwind =
      raw['unwind'] === undefined
        ? undefined
        : oneOf(raw['unwind'], `${field}.unwind`, ['auto', 'fp', 'mixed'] as const);
    return {
      ...(unwind && { unwind }),
      ...(raw['offCpu'] === true && { offCpu: true }),
      ...(minBlockUs !== undefined && { minBlockUs }),
      kind: 'profile',
      durationSeconds:
        raw['duration'] === undefined
          ? ruleDefaults.profile.durationSeconds
          : parseDuration(raw['duration'], `${field}.duration`) / 1000,
      frequency:
        raw['frequency'] === undefined
          ? ruleDefaults.profile.frequency
          : number(raw['frequency'], `${field}.frequency`, { min: 1, max: 10_000, integer: true }),
    };
  }
  object(value, field, ['kind', 'type']);
  const dumpType = raw['type'] === undefined ? 'full' : oneOf(raw['type'], `${field}.type`, dumpTypes);
  if (availability.dump !== true) throw rulesError(`${field}.kind`, availability.dump.why);
  return { kind: 'dump', type: dumpType };
}

function limits(value: unknown, field: string): Limits {
  const raw = value === undefined ? {} : object(value, field, ['maxActions', 'window', 'cooldown', 'lifetime']);
  const result: Limits = {
    maxActions:
      raw['maxActions'] === undefined
        ? ruleDefaults.limits.maxActions
        : number(raw['maxActions'], `${field}.maxActions`, { min: 1, max: 10_000, integer: true }),
    windowMs:
      raw['window'] === undefined ? ruleDefaults.limits.windowMs : parseDuration(raw['window'], `${field}.window`),
    cooldownMs:
      raw['cooldown'] === undefined
        ? ruleDefaults.limits.cooldownMs
        : raw['cooldown'] === 0 || raw['cooldown'] === '0'
          ? 0
          : parseDuration(raw['cooldown'], `${field}.cooldown`),
  };
  if (raw['lifetime'] !== undefined) result.lifetimeMs = parseDuration(raw['lifetime'], `${field}.lifetime`);
  return result;
}

function rule(value: unknown, field: string, availability: ActionAvailability, index: number): Rule {
  const raw = object(value, field, ['name', 'filters', 'trigger', 'actions', 'limits']);
  const name = raw['name'] === undefined ? `rule${index + 1}` : string(raw['name'], `${field}.name`, 64);
  // The name becomes part of run folder names and of trigger file names.
  if (!/^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name))
    throw rulesError(`${field}.name`, `${JSON.stringify(name)} must be letters, digits, . _ - (not first)`);
  if (raw['trigger'] === undefined) throw rulesError(`${field}.trigger`, 'is required');
  const actions = raw['actions'] === undefined ? [{ kind: 'profile' }] : raw['actions'];
  if (!Array.isArray(actions) || actions.length === 0 || actions.length > maxActionsPerRule)
    throw rulesError(`${field}.actions`, `must be a list of 1 to ${maxActionsPerRule} actions`);
  return {
    name,
    filters: filters(raw['filters'], `${field}.filters`),
    trigger: trigger(raw['trigger'], `${field}.trigger`),
    actions: actions.map((a, i) => action(a, `${field}.actions[${i}]`, availability)),
    limits: limits(raw['limits'], `${field}.limits`),
  };
}

/** Validates a parsed rules document (`{ rules: [...], retention: {...} }`). */
export function validateRules(document: unknown, availability = defaultAvailability): WatchRules {
  const raw = object(document, '', ['rules', 'retention']);
  const list = raw['rules'];
  if (!Array.isArray(list) || list.length === 0 || list.length > maxRules)
    throw rulesError('rules', `must be a list of 1 to ${maxRules} rules`);
  const rules = list.map((r, i) => rule(r, `rules[${i}]`, availability, i));
  const seen = new Set<string>();
  for (const [i, r] of rules.entries()) {
    if (seen.has(r.name)) throw rulesError(`rules[${i}].name`, `${JSON.stringify(r.name)} is used twice`);
    seen.add(r.name);
  }
  return { rules, retention: retention(raw['retention'], 'retention') };
}

function retention(value: unknown, field: string): Retention {
  const raw = value === undefined ? {} : object(value, field, ['maxRuns', 'maxBytes']);
  return {
    maxRuns:
      raw['maxRuns'] === undefined
        ? ruleDefaults.retention.maxRuns
        : number(raw['maxRuns'], `${field}.maxRuns`, { min: 1, max: 100_000, integer: true }),
    maxBytes:
      raw['maxBytes'] === undefined
        ? ruleDefaults.retention.maxBytes
        : parseBytes(raw['maxBytes'], `${field}.maxBytes`),
  };
}

/** Parses rules text: JSON when it starts with `{`, else YAML (a superset), then validates it. */
export function parseRulesText(text: string, availability = defaultAvailability): WatchRules {
  let document: unknown;
  try {
    document = /^\s*\{/.test(text) ? JSON.parse(text) : parseYaml(text, { maxAliasCount: 100, uniqueKeys: true });
  } catch (error) {
    throw new ProfcpuError('USAGE', `rules: not valid JSON or YAML: ${(error as Error).message}`, {
      remedy: 'Fix the rules file (docs/watch.md, "Rules files", shows an example).',
      cause: error,
    });
  }
  return validateRules(document, availability);
}

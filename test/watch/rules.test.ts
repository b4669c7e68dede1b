// Watch rules: a JSON and a YAML document give the same rules, defaults fill what is left out, and every mistake is
// an error naming the field (typos, wrong types, values out of range, the dump action where it is not available).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isProfcpuError } from '../../src/error.js';
import { parseBytes, parseDuration, parseRulesText, ruleDefaults, validateRules } from '../../src/watch/rules.js';

const yamlRules = `
rules:
  - name: hot
    filters: { name: Shop, runtime: dotnet }
    trigger: { type: cpu, above: 80, for: 30s, of: quota }
    actions:
      - kind: profile
        duration: 20s
        frequency: 49
    limits: { maxActions: 3, window: 1h, cooldown: 5m, lifetime: 2d }
  - name: nightly
    trigger: { type: schedule, every: 24h }
retention: { maxRuns: 10, maxBytes: 1GiB }
`;

test('a YAML and the same JSON rules file give the same rules, with defaults for what is left out', () => {
  const fromYaml = parseRulesText(yamlRules);
  const fromJson = parseRulesText(
    JSON.stringify({
      rules: [
        {
          name: 'hot',
          filters: { name: 'Shop', runtime: 'dotnet' },
          trigger: { type: 'cpu', above: 80, for: '30s', of: 'quota' },
          actions: [{ kind: 'profile', duration: 20, frequency: 49 }],
          limits: { maxActions: 3, window: '1h', cooldown: '5m', lifetime: '2d' },
        },
        { name: 'nightly', trigger: { type: 'schedule', every: '24h' } },
      ],
      retention: { maxRuns: 10, maxBytes: '1GiB' },
    }),
  );
  assert.deepEqual(fromYaml, fromJson);
  assert.deepEqual(fromYaml.rules[0], {
    name: 'hot',
    filters: { name: 'Shop', runtime: 'dotnet' },
    trigger: { type: 'cpu', above: 80, forMs: 30_000, of: 'quota' },
    actions: [{ kind: 'profile', durationSeconds: 20, frequency: 49 }],
    limits: { maxActions: 3, windowMs: 3_600_000, cooldownMs: 300_000, lifetimeMs: 172_800_000 },
  });
  // Left out: every .NET process, one profile with the default length, the default limits.
  assert.deepEqual(fromYaml.rules[1], {
    name: 'nightly',
    filters: { runtime: 'dotnet' },
    trigger: { type: 'schedule', everyMs: 86_400_000 },
    actions: [{ kind: 'profile', ...ruleDefaults.profile }],
    limits: { ...ruleDefaults.limits },
  });
  assert.deepEqual(fromYaml.retention, { maxRuns: 10, maxBytes: 1024 ** 3 });
});

function rejects(document: unknown, field: string, pattern: RegExp): void {
  assert.throws(
    () => validateRules(document),
    (error: unknown) => {
      assert.ok(isProfcpuError(error, 'USAGE'), String(error));
      assert.ok(error.message.startsWith(`rules: ${field}: `), `${error.message} names ${field}`);
      assert.match(error.message, pattern);
      return true;
    },
  );
}

const cpu = { type: 'cpu', above: 80, for: '30s' };

test('a profile action may ask for mixed unwinding, and only auto, fp or mixed', () => {
  const rules = validateRules({ rules: [{ trigger: cpu, actions: [{ kind: 'profile', unwind: 'mixed' }] }] });
  assert.deepEqual(rules.rules[0]!.actions, [{ kind: 'profile', ...ruleDefaults.profile, unwind: 'mixed' }]);
  const auto = validateRules({ rules: [{ trigger: cpu, actions: [{ kind: 'profile', unwind: 'auto' }] }] });
  assert.deepEqual(auto.rules[0]!.actions, [{ kind: 'profile', ...ruleDefaults.profile, unwind: 'auto' }]);
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'profile', unwind: 'dwarf' }] }] },
    'rules[0].actions[0].unwind',
    /fp|mixed/,
  );
});

test('a profile action may ask for the off-CPU profile, with true or false', () => {
  const rules = validateRules({ rules: [{ trigger: cpu, actions: [{ kind: 'profile', offCpu: true }] }] });
  assert.deepEqual(rules.rules[0]!.actions, [{ kind: 'profile', ...ruleDefaults.profile, offCpu: true }]);
  const off = validateRules({ rules: [{ trigger: cpu, actions: [{ kind: 'profile', offCpu: false }] }] });
  assert.deepEqual(off.rules[0]!.actions, [{ kind: 'profile', ...ruleDefaults.profile }]);
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'profile', offCpu: 'yes' }] }] },
    'rules[0].actions[0].offCpu',
    /true or false/,
  );
  const long = validateRules({
    rules: [{ trigger: cpu, actions: [{ kind: 'profile', offCpu: true, minBlock: '2ms' }] }],
  });
  assert.deepEqual(long.rules[0]!.actions, [
    { kind: 'profile', ...ruleDefaults.profile, offCpu: true, minBlockUs: 2000 },
  ]);
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'profile', minBlock: '2ms' }] }] },
    'rules[0].actions[0].minBlock',
    /goes with offCpu/,
  );
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'profile', offCpu: true, minBlock: 'soon' }] }] },
    'rules[0].actions[0].minBlock',
    /not a time/,
  );
});

test('each mistake is an error naming its field', () => {
  rejects({}, 'rules', /list of 1 to 64 rules/);
  rejects({ rules: [{ trigger: cpu }], retentoin: {} }, 'retentoin', /unknown field \(known: rules, retention\)/);
  rejects({ rules: [{ trigger: cpu, action: [] }] }, 'rules[0].action', /unknown field/);
  rejects({ rules: [{}] }, 'rules[0].trigger', /is required/);
  rejects({ rules: [{ trigger: { type: 'cpu', for: '30s' } }] }, 'rules[0].trigger.above', /is required/);
  rejects({ rules: [{ trigger: { ...cpu, above: '80%' } }] }, 'rules[0].trigger.above', /must be a number from 1/);
  rejects({ rules: [{ trigger: { ...cpu, for: '30 parsecs' } }] }, 'rules[0].trigger.for', /not a duration/);
  rejects({ rules: [{ trigger: { ...cpu, for: '100ms' } }] }, 'rules[0].trigger.for', /from 1s to 1d/);
  rejects({ rules: [{ trigger: { ...cpu, of: 'socket' } }] }, 'rules[0].trigger.of', /one of core, quota/);
  rejects(
    { rules: [{ trigger: { type: 'cpu', above: 80, for: '30s', every: '1h' } }] },
    'rules[0].trigger.every',
    /unknown/,
  );
  rejects({ rules: [{ trigger: { type: 'schedule', every: '1s' } }] }, 'rules[0].trigger.every', /10s or more/);
  rejects({ rules: [{ trigger: { type: 'later' } }] }, 'rules[0].trigger.type', /cpu, schedule, demand/);
  rejects({ rules: [{ trigger: cpu, filters: { pid: 1.5 } }] }, 'rules[0].filters.pid', /whole number/);
  rejects({ rules: [{ trigger: cpu, filters: { runtime: 'java' } }] }, 'rules[0].filters.runtime', /dotnet, node/);
  rejects({ rules: [{ trigger: cpu, actions: [{ kind: 'trace' }] }] }, 'rules[0].actions[0].kind', /profile, dump/);
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'profile', type: 'full' }] }] },
    'rules[0].actions[0].type',
    /unknown/,
  );
  rejects({ rules: [{ trigger: cpu, actions: [] }] }, 'rules[0].actions', /1 to 8 actions/);
  rejects({ rules: [{ trigger: cpu, limits: { maxActions: 0 } }] }, 'rules[0].limits.maxActions', /from 1/);
  rejects({ rules: [{ trigger: cpu, name: '../up' }] }, 'rules[0].name', /letters, digits/);
  rejects(
    {
      rules: [
        { trigger: cpu, name: 'a' },
        { trigger: cpu, name: 'a' },
      ],
    },
    'rules[1].name',
    /used twice/,
  );
  rejects({ rules: [{ trigger: cpu }], retention: { maxBytes: '2 lots' } }, 'retention.maxBytes', /not a size/);
});

test('the dump action is validated (kind dump, type) and refused where not available', () => {
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'dump', type: 'huge' }] }] },
    'rules[0].actions[0].type',
    /full, heap, mini, triage/,
  );
  rejects(
    { rules: [{ trigger: cpu, actions: [{ kind: 'dump', type: 'heap' }] }] },
    'rules[0].actions[0].kind',
    /the dump action is not available here/,
  );
  // A build with a dump action takes it.
  const rules = validateRules(
    { rules: [{ trigger: cpu, actions: [{ kind: 'dump', type: 'heap' }] }] },
    { profile: true, dump: true },
  );
  assert.deepEqual(rules.rules[0]!.actions, [{ kind: 'dump', type: 'heap' }]);
});

test('YAML that is not a rules document, or bombs with aliases, is refused with a message', () => {
  assert.throws(() => parseRulesText('rules: [ {'), /rules: not valid JSON or YAML/);
  assert.throws(() => parseRulesText('rules: 1\nrules: 2\n'), /rules: not valid JSON or YAML/);
  const bomb = ['a: &a [x, x, x, x, x, x, x, x, x]'];
  for (let i = 0; i < 12; i++)
    bomb.push(
      `${'b'.repeat(i + 1)}: &b${i} [${Array(9)
        .fill(i === 0 ? '*a' : `*b${i - 1}`)
        .join(', ')}]`,
    );
  assert.throws(() => parseRulesText(bomb.join('\n')), /rules: not valid JSON or YAML: Excessive alias count/);
});

test('durations and sizes', () => {
  assert.equal(parseDuration(30, 'x'), 30_000);
  assert.equal(parseDuration('500ms', 'x'), 500);
  assert.equal(parseDuration('1.5m', 'x'), 90_000);
  assert.throws(() => parseDuration('-3s', 'x'), /x: "-3s" is not a duration/);
  assert.throws(() => parseDuration(0, 'x'), /not a duration/);
  assert.equal(parseBytes('500MiB', 'y'), 500 * 1024 ** 2);
  assert.equal(parseBytes('2GB', 'y'), 2e9);
  assert.equal(parseBytes(1000, 'y'), 1000);
  assert.throws(() => parseBytes('2 PiB', 'y'), /y: "2 PiB" is not a size/);
});

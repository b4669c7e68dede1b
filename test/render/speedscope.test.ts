import assert from 'node:assert/strict';
import { test } from 'node:test';
import { renderSpeedscope, speedscopeSchema, toSpeedscope } from '../../src/render/speedscope.js';
import { parseFoldedText } from '../../src/stacks/folded.js';
import { readFixture } from './golden.js';

const dotnet = () => parseFoldedText(readFixture('dotnet.folded')).stacks;

test('the file has the fields speedscope requires for a sampled profile over shared frames', () => {
  const file = JSON.parse(renderSpeedscope(dotnet(), { name: 'demo' }));
  assert.equal(file.$schema, speedscopeSchema);
  assert.ok(Array.isArray(file.shared.frames));
  for (const frame of file.shared.frames) assert.equal(typeof frame.name, 'string');
  assert.equal(file.profiles.length, 1);
  const [profile] = file.profiles;
  for (const field of ['type', 'name', 'unit', 'startValue', 'endValue', 'samples', 'weights'])
    assert.ok(field in profile, field);
  assert.equal(profile.type, 'sampled');
  assert.equal(profile.unit, 'none');
  assert.equal(profile.name, 'demo');
  assert.equal(file.activeProfileIndex, 0);
  assert.equal(profile.samples.length, profile.weights.length);
  for (const sample of profile.samples)
    for (const index of sample) assert.ok(Number.isInteger(index) && index >= 0 && index < file.shared.frames.length);
});

test('weights sum to the total and every stack reads back', () => {
  const stacks = dotnet();
  const file = toSpeedscope(stacks);
  const profile = file.profiles[0]!;
  const sum = profile.weights.reduce((a, b) => a + b, 0);
  assert.equal(sum, 382);
  assert.equal(profile.endValue - profile.startValue, sum);
  const names = file.shared.frames.map((f) => f.name);
  const stack = profile.samples.map((s) => s.map((i) => names[i]).join(';'));
  assert.ok(stack.includes('dotnet;[libcoreclr.so];Program.<Main>$(System.String[])'));
  assert.ok(
    stack.includes(
      'swapper;secondary_startup_64_no_verify [kernel];cpu_startup_entry [kernel];do_idle [kernel];default_idle_call [kernel]',
    ),
  );
  assert.equal(new Set(names).size, names.length, 'frames are shared, not repeated');
});

test('deterministic and tolerant of zero weights', () => {
  const a = renderSpeedscope(dotnet());
  assert.equal(renderSpeedscope(new Map([...dotnet()].reverse())), a);
  const withZero = new Map([...dotnet(), ['ghost;frame', 0]]);
  assert.equal(renderSpeedscope(withZero), a);
});

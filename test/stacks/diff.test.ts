import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { diffStacks, frameChanges } from '../../src/stacks/diff.js';
import { parseFoldedText } from '../../src/stacks/folded.js';

const fixtures = new URL('../fixtures/diff/', import.meta.url);
const read = (name: string) => readFileSync(new URL(name, fixtures), 'utf8');
const folded = (name: string) => parseFoldedText(read(name)).stacks;
const keepAll = { keepTier: true, keepArgs: true, keepGenerics: true, keepNumbers: true };

/** difffolded.pl's lines: stack → [count1, count2]. */
function difffolded(name: string): Map<string, [number, number]> {
  const lines = read(name).split('\n').filter(Boolean);
  return new Map(
    lines.map((line) => {
      const [, stack, before, after] = /^(.*) (\d+) (\d+)$/.exec(line)!;
      return [stack!, [Number(before), Number(after)]];
    }),
  );
}

test('stack by stack, the same before/after counts as difffolded.pl, with -n and without', () => {
  for (const [file, normalize] of [
    ['difffolded-n.txt', true],
    ['difffolded.txt', false],
  ] as const) {
    const expected = difffolded(file);
    const diff = diffStacks(folded('before.folded'), folded('after.folded'), { ...keepAll, normalize });
    assert.equal(diff.stacks.size, expected.size, file);
    for (const [stack, [before, after]] of expected) {
      const counts = diff.stacks.get(stack);
      assert.ok(counts, `${file}: ${stack}`);
      assert.equal(counts.after, after, `${file}: ${stack}`);
      // difffolded.pl truncates each scaled count to an integer (Perl's int()).
      assert.equal(Math.floor(counts.before + 1e-9), before, `${file}: ${stack}`);
    }
  }
});

test('frame by frame, inclusive counts agree with difffolded.pl’s, within its truncation', () => {
  const expected = difffolded('difffolded-n.txt');
  const inclusive = new Map<string, [number, number, number]>();
  for (const [stack, [before, after]] of expected)
    for (const frame of new Set(stack.split(';'))) {
      const entry = inclusive.get(frame) ?? [0, 0, 0];
      inclusive.set(frame, [entry[0] + before, entry[1] + after, entry[2] + 1]);
    }
  const diff = diffStacks(folded('before.folded'), folded('after.folded'), keepAll);
  const changes = new Map(frameChanges(diff).map((c) => [c.frame, c]));
  assert.equal(changes.size, inclusive.size);
  for (const [frame, [before, after, stacks]] of inclusive) {
    const change = changes.get(frame)!;
    assert.equal(change.after.inclusive, after, frame);
    const scaled = change.before.inclusive * diff.scale;
    assert.ok(scaled - before >= -1e-6 && scaled - before < stacks, `${frame}: ${scaled} against ${before}`);
  }
});

test('shares and points: a workload twice as heavy grows, the rest shrinks, shares add up', () => {
  const diff = diffStacks(folded('before.folded'), folded('after.folded'));
  const changes = frameChanges(diff);
  const grind = changes.find((c) => c.frame === 'ProfcpuFixture.LinqMill::Grind_[j]')!;
  assert.ok(grind.inclusivePoints > 10, String(grind.inclusivePoints));
  const roots = changes.filter((c) => c.frame.startsWith('fixture-'));
  const sum = (side: 'before' | 'after') => roots.reduce((s, c) => s + c[side].inclusiveShare, 0);
  assert.ok(Math.abs(sum('before') - 100) < 1e-9 && Math.abs(sum('after') - 100) < 1e-9);
  // Sorted by the size of the move.
  for (let i = 1; i < changes.length; i++)
    assert.ok(Math.abs(changes[i - 1]!.inclusivePoints) >= Math.abs(changes[i]!.inclusivePoints));
});

test('noise merged by default, each rule counted with an example, and kept apart on request', () => {
  const before = new Map([
    ['worker-1;[System.Private.CoreLib] Foo::Bar(int32)[OptimizedTier1]_[j]', 4],
    ['worker-2;List`1[System.Int32]::Add(!0)_[j];stub<12> AllocateTemporaryEntryPoints;0x7f0011223344', 2],
    ['worker-2;Svc::Get<System.__Canon>(string)_[j]', 1],
  ]);
  const after = new Map([
    ['worker-7;[System.Private.CoreLib] Foo::Bar(int32)[Tier0]_[j]', 8],
    ['worker-7;List`1[System.String]::Add(!0)_[j];stub<3> AllocateTemporaryEntryPoints;0x7f0099887766', 4],
    ['worker-7;Svc::Get<System.Int32>(string)_[j]', 2],
    ['main;<Main>$(System.String[])_[j];Foo+<StepAsync>d__1::MoveNext_[j]', 2],
  ]);
  const merged = diffStacks(before, after);
  assert.deepEqual([...merged.stacks.keys()].sort(), [
    'main;<Main>$_[j];Foo+<StepAsync>d__1::MoveNext_[j]',
    'worker;List`1::Add_[j];stub<> AllocateTemporaryEntryPoints;0x…',
    'worker;Svc::Get<>_[j]',
    'worker;[System.Private.CoreLib] Foo::Bar_[j]',
  ]);
  assert.deepEqual(
    merged.merged.map((m) => m.rule),
    ['tier', 'args', 'generics', 'numbers'],
  );
  assert.match(merged.merged[0]!.example, /Foo::Bar\(int32\)\[OptimizedTier1\] → .*Foo::Bar\(int32\)$/);
  // Shares compared: BEFORE (7) scaled to AFTER's total (16); nothing in the worker's stacks moved but main's arrival.
  const bar = merged.stacks.get('worker;[System.Private.CoreLib] Foo::Bar_[j]')!;
  assert.deepEqual(bar, { before: (4 * 16) / 7, after: 8 });

  const kept = diffStacks(before, after, {
    keepTier: true,
    keepArgs: true,
    keepGenerics: true,
    keepNumbers: true,
    normalize: false,
  });
  assert.equal(kept.stacks.size, 7);
  assert.deepEqual(kept.merged, []);
  assert.equal(kept.scale, 1);
});

test('frames in one profile only: a share from or to zero; recursion counted once per stack', () => {
  const diff = diffStacks(new Map([['t;a;a;a', 2]]), new Map([['t;b', 2]]), { keepNumbers: true });
  const changes = new Map(frameChanges(diff).map((c) => [c.frame, c]));
  assert.equal(changes.get('a')!.before.inclusiveShare, 100);
  assert.equal(changes.get('a')!.after.inclusiveShare, 0);
  assert.equal(changes.get('a')!.inclusivePoints, -100);
  assert.equal(changes.get('b')!.inclusivePoints, 100);
  assert.equal(changes.get('t')!.inclusivePoints, 0);
});

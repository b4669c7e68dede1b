import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildFlameTree, walkFlameTree, type FlameNode } from '../../src/render/flame-layout.js';
import type { FoldedStacks } from '../../src/stacks/folded.js';

/** `depth:name@start+weight` for every node, parents first. */
function describe(stacks: FoldedStacks, minWeight = 0, reverse = false): string[] {
  const out: string[] = [];
  walkFlameTree(buildFlameTree(stacks, { reverse, minWeight }).root, (n: FlameNode) =>
    out.push(
      `${n.depth}:${n.kind === 'merged' ? `[${n.merged}]` : n.kind === 'root' ? 'all' : n.frame}@${n.start}+${n.weight}`,
    ),
  );
  return out;
}

test("siblings merge by name, in name order, after the parent's own weight", () => {
  const stacks: FoldedStacks = new Map([
    ['a;c', 2],
    ['a;b;x', 3],
    ['a', 1],
    ['a;b', 4],
    ['d', 5],
  ]);
  assert.deepEqual(describe(stacks), ['0:all@0+15', '1:a@0+10', '2:b@1+7', '3:x@5+3', '2:c@8+2', '1:d@10+5']);
});

test('a name that is a prefix of its sibling does not split the parent (the `;` ordering trap)', () => {
  const stacks: FoldedStacks = new Map([
    ['X;Run', 1],
    ['X;Run2;y', 1],
    ['X;Run;z', 1],
    ['X;Run+Inner;w', 1],
  ]);
  const nodes = describe(stacks);
  assert.equal(nodes.filter((n) => n.startsWith('2:Run@')).length, 1);
  assert.deepEqual(nodes, [
    '0:all@0+4',
    '1:X@0+4',
    '2:Run@0+2',
    '3:z@1+1',
    '2:Run+Inner@2+1',
    '3:w@2+1',
    '2:Run2@3+1',
    '3:y@3+1',
  ]);
});

test('adjacent light siblings merge into one block; a lone light frame and what is under light frames go', () => {
  const stacks: FoldedStacks = new Map([
    ['m;a', 1],
    ['m;b;deep', 1],
    ['m;c', 1],
    ['m;heavy', 10],
    ['m;z', 1],
  ]);
  assert.deepEqual(describe(stacks, 2), ['0:all@0+14', '1:m@0+14', '2:[3]@0+3', '2:heavy@3+10']);
  // A merged block lighter than the threshold is dropped too.
  assert.deepEqual(describe(stacks, 4), ['0:all@0+14', '1:m@0+14', '2:heavy@3+10']);
});

test('reverse puts leaves at the root; non-positive weights are ignored; empty frames are kept', () => {
  const stacks: FoldedStacks = new Map([
    ['main;f;leaf', 2],
    ['other;leaf', 1],
    ['zero;x', 0],
    ['a;;b', 1],
  ]);
  assert.deepEqual(describe(stacks, 0, true), [
    '0:all@0+4',
    '1:b@0+1',
    '2:@0+1',
    '3:a@0+1',
    '1:leaf@1+3',
    '2:f@1+2',
    '3:main@1+2',
    '2:other@3+1',
  ]);
  const tree = buildFlameTree(new Map([['x', 0]]), { reverse: false, minWeight: 0 });
  assert.equal(tree.total, 0);
  assert.equal(tree.root.children.length, 0);
});

test('depth and node counts are reported; a single deep stack is one chain', () => {
  const deep = Array.from({ length: 5000 }, (_, i) => `f${i}`).join(';');
  const tree = buildFlameTree(new Map([[deep, 3]]), { reverse: false, minWeight: 1 });
  assert.equal(tree.maxDepth, 5000);
  assert.equal(tree.nodeCount, 5001);
});

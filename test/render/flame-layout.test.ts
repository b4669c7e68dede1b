import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildFlameTree, walkFlameTree, type FlameNode } from './flame-tree.js';
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

/** Path → weight of every frame, by the obvious method, for comparison. */
function reference(stacks: FoldedStacks): Map<string, number> {
  const out = new Map<string, number>();
  for (const [stack, weight] of stacks) {
    const frames = stack.split(';');
    for (let i = 1; i <= frames.length; i++) {
      const path = frames.slice(0, i).join(';');
      out.set(path, (out.get(path) ?? 0) + weight);
    }
  }
  return out;
}

test('random stacks over names that prefix each other: same frames and weights as the obvious method', () => {
  let seed = 12345;
  const next = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
  const names = ['a', 'a+', 'a+b', 'a2', 'a!', 'ab', 'b', '', 'a b', '~', 'é', '🔥'];
  for (let round = 0; round < 200; round++) {
    const stacks: FoldedStacks = new Map();
    const count = 1 + Math.floor(next() * 30);
    for (let i = 0; i < count; i++) {
      const depth = 1 + Math.floor(next() * 5);
      const frames = Array.from({ length: depth }, () => names[Math.floor(next() * names.length)]!);
      stacks.set(frames.join(';'), 1 + Math.floor(next() * 5));
    }
    const tree = buildFlameTree(stacks, { reverse: false, minWeight: 0 });
    const got = new Map<string, number>();
    const visit = (node: FlameNode, path: string) => {
      let end = node.start + node.weight;
      // Children lie inside their parent, after its own weight, left to right without overlap.
      for (let i = node.children.length - 1; i >= 0; i--) {
        const child = node.children[i]!;
        assert.equal(child.start + child.weight, end, 'children are packed against the right edge');
        end = child.start;
        const childPath = node.kind === 'root' ? child.frame : `${path};${child.frame}`;
        assert.ok(!got.has(childPath), `frame ${JSON.stringify(childPath)} appears once`);
        got.set(childPath, child.weight);
        visit(child, childPath);
      }
      assert.ok(end >= node.start);
    };
    visit(tree.root, '');
    assert.deepEqual(new Map([...got].sort()), new Map([...reference(stacks)].sort()), JSON.stringify([...stacks]));
  }
});

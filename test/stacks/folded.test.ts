import assert from 'node:assert/strict';
import { test } from 'node:test';
import { formatFolded, inSortedOrder, parseFoldedText } from '../../src/stacks/folded.js';
import { renderHtml, renderSpeedscope, renderSvg } from '../../src/render/index.js';

test('folded lines come out in UTF-8 byte order, as `LC_ALL=C sort` gives', () => {
  const stacks = new Map([
    ['b;a', 1],
    ['a;\u{1F600}', 2],
    ['a;\uFF21', 3],
    ['a;z', 4],
    ['B', 5],
  ]);
  assert.deepEqual([...formatFolded(stacks)], ['B 5\n', 'a;z 4\n', 'a;\uFF21 3\n', 'a;\u{1F600} 2\n', 'b;a 1\n']);
  assert.deepEqual(
    [
      ...formatFolded(
        new Map([
          ['b', 1],
          ['a;b', 2],
          ['a', 0.5],
        ]),
      ),
    ],
    ['a 0.5\n', 'a;b 2\n', 'b 1\n'],
  );
});

test('parsing folded text keeps spaces inside frames and counts bad lines', () => {
  const { stacks, skipped } = parseFoldedText('a b;c d 3\r\nnot-a-count x\n\na b;c d 2\n');
  assert.deepEqual([...stacks], [['a b;c d', 5]]);
  assert.equal(skipped, 1);
});

test('the stacks in sorted order: the same entries, iterated sorted, and the same folded text and renders', () => {
  const stacks = new Map([
    ['b;a', 1],
    ['a;\u{1F600}', 2],
    ['a;\uFF21', 3],
    ['a;z;y', 4],
    ['a;z', 6],
    ['B', 5],
  ]);
  const sorted = inSortedOrder(stacks);
  assert.deepEqual([...sorted.keys()], [...stacks.keys()].sort());
  assert.deepEqual(new Map([...sorted].sort()), new Map([...stacks].sort()));
  assert.equal([...formatFolded(sorted)].join(''), [...formatFolded(stacks)].join(''));
  for (const render of [renderSvg, renderHtml, renderSpeedscope]) assert.equal(render(sorted), render(stacks));
});

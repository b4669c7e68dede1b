import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BytesMap } from '../../src/stacks/bytes-map.js';

test('keys are byte ranges plus a salt; values survive growth of the table and the arena', () => {
  const map = new BytesMap<number>();
  const line = (i: number) => Buffer.from(`  ${i.toString(16)} function_${i}+0x1${'x'.repeat(i % 300)} (/lib/l.so)`);
  for (let i = 0; i < 20_000; i++) {
    const buf = line(i);
    for (const salt of [0, 7]) {
      assert.equal(map.get(buf, 2, buf.length, salt), undefined);
      map.set(buf, 2, buf.length, salt, i * 2 + salt);
    }
  }
  assert.equal(map.size, 40_000);
  for (let i = 0; i < 20_000; i += 97) {
    // The same bytes at another offset of another buffer.
    const buf = Buffer.concat([Buffer.from('prefix'), line(i)]);
    assert.equal(map.get(buf, 8, buf.length, 0), i * 2);
    assert.equal(map.valueAt(map.lastIndex), i * 2);
    assert.ok(map.matches(map.lastIndex, buf, 8, buf.length, 0));
    assert.ok(!map.matches(map.lastIndex, buf, 8, buf.length, 7));
    assert.equal(map.get(buf, 8, buf.length, 7), i * 2 + 7);
    assert.equal(map.get(buf, 8, buf.length - 1, 0), undefined);
  }
});

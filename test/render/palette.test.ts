import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FrameStyle } from '../../src/render/frames.js';
import { frameColor, hashName, isPaletteName, mergedColor, paletteNames } from '../../src/render/palette.js';

const styles: FrameStyle[] = ['managed', 'native', 'kernel', 'inline', 'unknown'];

test('colours depend only on palette, style, name and seed', () => {
  for (const palette of paletteNames)
    for (const style of styles) {
      const colour = frameColor(palette, style, 'System.String::Concat', 3);
      assert.match(colour, /^rgb\(\d{1,3},\d{1,3},\d{1,3}\)$/);
      assert.equal(frameColor(palette, style, 'System.String::Concat', 3), colour);
    }
  assert.notEqual(hashName('a', 0), hashName('a', 1));
  assert.notEqual(hashName('a', 0), hashName('b', 0));
});

test('the dotnet palette tells managed, native, kernel, inlined and unknown frames apart by hue', () => {
  const hue = (style: FrameStyle) => {
    const [r, g, b] = frameColor('dotnet', style, 'f', 0).match(/\d+/g)!.map(Number) as [number, number, number];
    if (r === g && g === b) return 'grey';
    if (g > r && g > b) return 'green';
    if (b === 0 && r > g) return 'orange';
    if (g > r && b > r) return 'aqua';
    return 'red';
  };
  assert.deepEqual(styles.map(hue), ['green', 'red', 'orange', 'aqua', 'grey']);
  assert.equal(frameColor('hot', 'merged', 'x', 0), mergedColor);
});

test('palette names', () => {
  assert.ok(isPaletteName('dotnet') && isPaletteName('java') && isPaletteName('hot'));
  assert.ok(!isPaletteName('rainbow'));
});

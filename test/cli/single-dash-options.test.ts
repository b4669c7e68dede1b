import assert from 'node:assert/strict';
import { test } from 'node:test';
import { singleDashToDouble } from '../../src/cli/single-dash-options.js';

const longs = new Set(['pid', 'duration', 'dir']);

test('one-dash long options of the original tool become two-dash', () => {
  assert.deepEqual(singleDashToDouble(['collect', '-pid', '1', '-duration', '10'], longs), [
    'collect',
    '--pid',
    '1',
    '--duration',
    '10',
  ]);
  assert.deepEqual(singleDashToDouble(['postprocess', '-dir=out'], longs), ['postprocess', '--dir=out']);
});

test('short flags, unknown words and everything after -- are left alone', () => {
  assert.deepEqual(singleDashToDouble(['-q', '-xyz', '--pid', '2', '--', '-pid'], longs), [
    '-q',
    '-xyz',
    '--pid',
    '2',
    '--',
    '-pid',
  ]);
});

// The README and the docs/ chapters, read as a newcomer would: every relative link (and image) points at a file that
// exists, every #fragment at a heading of that file (GitHub's anchors), and the README's first code block is the two
// commands a fresh Debian or Ubuntu machine needs.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { test } from 'node:test';
import { repoRoot } from '../support/cli.js';

/**
 * Files linked before they land from another branch: tolerated while missing, checked like any other once there.
 * Remove an entry when its file is in.
 */
const landingElsewhere = new Set<string>();

const pages = [
  'README.md',
  ...readdirSync(join(repoRoot, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The text outside fenced code blocks and inline code spans, where links are links. */
function prose(markdown: string): string {
  return markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchor for each heading of a page, with -1, -2... for repeats. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```/gm, '').matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const text = heading!.replace(/\[([^\]]*)\]\([^)]*\)/g, '$1').replace(/[`*_]/g, (c) => (c === '_' ? c : ''));
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    result.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return result;
}

function links(markdown: string): string[] {
  return [...prose(markdown).matchAll(/!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}

test('every relative link of README.md and docs/*.md resolves, #fragments included', () => {
  const broken: string[] = [];
  for (const page of pages) {
    const text = readFileSync(join(repoRoot, page), 'utf8');
    for (const link of links(text)) {
      if (/^[a-z][a-z0-9+.-]*:/i.test(link)) continue;
      const [path, fragment] = link.split('#', 2) as [string, string | undefined];
      const target = path === '' ? page : relative(repoRoot, join(repoRoot, dirname(page), decodeURI(path)));
      if (!existsSync(join(repoRoot, target))) {
        if (!landingElsewhere.has(target)) broken.push(`${page}: ${link} (no ${target})`);
        continue;
      }
      if (fragment !== undefined && target.endsWith('.md')) {
        if (!anchors(readFileSync(join(repoRoot, target), 'utf8')).has(fragment))
          broken.push(`${page}: ${link} (no heading #${fragment} in ${target})`);
      }
    }
  }
  assert.deepEqual(broken, []);
});

test('the README starts with the two commands a newcomer types', () => {
  const readme = readFileSync(join(repoRoot, 'README.md'), 'utf8');
  const first = /^```sh\n([\s\S]*?)^```/m.exec(readme)?.[1] ?? '';
  const commands = first
    .split('\n')
    .map((line) => line.replace(/#.*/, '').trim())
    .filter(Boolean);
  assert.deepEqual(commands, [
    'sudo scripts/setup.sh && sudo npm run demo',
    'sudo scripts/setup.sh --test && sudo npm test',
  ]);
  // Within the first screen: after the title and a one-paragraph pitch.
  assert.ok(readme.split('\n').findIndex((line) => line.startsWith('sudo scripts/setup.sh')) < 12);
});

test('the anchors are GitHub’s', () => {
  assert.deepEqual(
    [...anchors('# A prof.tar.gz somebody sent\n## `perf_map`\n### 3. Records\n## Trust\n## Trust\n')],
    ['a-proftargz-somebody-sent', 'perf_map', '3-records', 'trust', 'trust-1'],
  );
});

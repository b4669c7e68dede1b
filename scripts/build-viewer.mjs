#!/usr/bin/env node
// Bundles the HTML flame graph's browser side (src/render/viewer.browser.js with d3-flame-graph and d3) into one
// IIFE, assets/viewer.js, and its style sheet, assets/viewer.css, for renderHtml to inline: the page then needs
// no network. Fails if the bundle holds a sequence that would end or confuse the inline <script> element.
import { build } from 'esbuild';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

await build({
  absWorkingDir: root,
  entryPoints: ['src/render/viewer.browser.js'],
  outfile: 'assets/viewer.js',
  bundle: true,
  format: 'iife',
  platform: 'browser',
  target: ['es2020'],
  minify: true,
  legalComments: 'none',
  charset: 'utf8',
  logLevel: 'warning',
});

for (const file of ['assets/viewer.js', 'assets/viewer.css']) {
  const text = readFileSync(`${root}/${file}`, 'utf8');
  const bad = [/<\/script/i, /<!--/, /<\/style/i].find((pattern) => pattern.test(text));
  if (bad) {
    console.error(`build-viewer: ${file} contains ${bad}, which would break the inline element in the HTML page`);
    process.exit(1);
  }
}

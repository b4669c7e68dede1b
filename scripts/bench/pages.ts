// Pages benchmark: how long flamegraph.html and flamegraph.svg of 10 000 and 40 000 distinct stacks (synthetic, 20 to
// 60 frames deep) take to open in Debian's Chromium (headless, from a file, offline): to the load event, and until
// the graph's frames are drawn. Best and median of 3 runs. Never asserted. Needs `chromium` (setup.sh --test).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { renderHtml } from '../../src/render/html.js';
import { renderSvg } from '../../src/render/svg.js';
import { launchChromium, openPage } from '../../test/support/browser.js';
import { syntheticStacks } from './support/synthetic-stacks.js';

const runs = 3;
const dir = mkdtempSync(join(tmpdir(), 'profcpu-bench-pages-'));
const browser = await launchChromium();
try {
  for (const count of [10_000, 40_000]) {
    const stacks = syntheticStacks(count);
    for (const [name, content, selector] of [
      [`${count}.html`, renderHtml(stacks), 'g.frame'],
      [`${count}.svg`, renderSvg(stacks), '#frames > g'],
    ] as const) {
      const path = join(dir, name);
      writeFileSync(path, content);
      const load: number[] = [];
      const drawn: number[] = [];
      for (let i = 0; i < runs; i++) {
        const start = performance.now();
        const opened = await openPage(browser, path);
        await opened.page.waitForSelector(selector, { timeout: 120_000 });
        drawn.push(performance.now() - start);
        load.push(opened.loadMs);
        await opened.close();
      }
      const fmt = (ms: number[]) => {
        const sorted = [...ms].sort((a, b) => a - b);
        return `best ${(sorted[0]! / 1000).toFixed(2)} s, median ${(sorted[Math.floor(runs / 2)]! / 1000).toFixed(2)} s`;
      };
      console.log(
        `${name.padEnd(12)} ${(content.length / 1e6).toFixed(1).padStart(5)} MB: load ${fmt(load)}; drawn ${fmt(drawn)}`,
      );
    }
  }
} finally {
  await browser.close();
  rmSync(dir, { recursive: true, force: true });
}

// The HTML flame graph's browser side, bundled by scripts/build-viewer.mjs with d3-flame-graph into
// assets/viewer.js. Reads the data renderHtml embedded in <script id="profcpu-data" type="application/json">
// ({ options, tree }) and draws it: click to zoom, reset, regexp search with matched percentage, tooltips.
// Names reach the page only through textContent (d3's .text()), never as markup.
import flamegraph from 'd3-flame-graph';
import { select } from 'd3-selection';
import { styleOfCode } from './frames.js';
import { diffColor, frameColor, searchColor } from './palette.js';

const data = JSON.parse(document.getElementById('profcpu-data').textContent);
const o = data.options;
const total = data.tree.v;
const chartElement = document.getElementById('chart');
const matched = document.getElementById('matched');
const input = document.getElementById('term');

const percent = (value) => (total > 0 ? ((100 * value) / total).toFixed(2) : '0.00');
const count = (value) => (Number.isInteger(value) ? value.toLocaleString('en-US') : value.toFixed(3));
// A differential graph (render/diff.ts): each node carries its weight before (`b`, scaled) and after (`a`).
const diff = o.diff;
const share = (value, of) => (of > 0 ? (100 * value) / of : 0);
const isDiffed = (d) => diff && typeof d.data.a === 'number';
function diffLabel(d) {
  const before = share(d.data.b, diff.beforeTotal);
  const after = share(d.data.a, diff.afterTotal);
  const points = after - before;
  const sign = points > 0 ? '+' : points < 0 ? '\u2212' : '\u00b1';
  const raw = Math.round((d.data.b / diff.scale) * 1000) / 1000;
  return (
    `${d.data.n} (before ${count(raw)} ${o.countName} (${before.toFixed(2)}%), ` +
    `after ${count(d.data.a)} (${after.toFixed(2)}%), ${sign}${Math.abs(points).toFixed(2)} pts)`
  );
}
function colorOf(d) {
  if (d.highlight) return searchColor;
  if (isDiffed(d)) return diffColor(d.data.a - d.data.b, diff.maxAbs);
  return frameColor(o.colors, styleOfCode(d.data.l), d.data.n, o.seed);
}

let compiled = { term: undefined, re: undefined };
function regexpOf(term) {
  if (compiled.term !== term) {
    let re;
    try {
      re = new RegExp(term);
    } catch {
      re = new RegExp(term.replace(/[.*+?^$()|[\]{}\\]/g, '\\$&'));
    }
    compiled = { term, re };
  }
  return compiled.re;
}

const chart = flamegraph()
  .width(o.width > 0 ? o.width : Math.max(600, chartElement.clientWidth))
  .cellHeight(o.frameHeight)
  .minFrameSize(o.minFrameSize)
  .inverted(o.inverted)
  .sort(false)
  .transitionDuration(300)
  .getName((d) => d.data.n)
  .setColorMapper(colorOf)
  .label((d) => (isDiffed(d) ? diffLabel(d) : `${d.data.n} (${count(d.data.v)} ${o.countName}, ${percent(d.data.v)}%)`))
  .setSearchMatch((d, term) => Boolean(term) && regexpOf(term).test(d.data.n))
  .setSearchHandler((_results, sum) => {
    matched.textContent = `Matched: ${percent(sum)}%`;
  })
  .setDetailsElement(document.getElementById('details'));

select(chartElement).datum(data.tree).call(chart);

function search() {
  if (input.value) chart.search(input.value);
  else clearSearch();
}
function clearSearch() {
  input.value = '';
  chart.clear();
  matched.textContent = '';
}
input.addEventListener('input', search);
document.getElementById('reset-zoom').addEventListener('click', () => chart.resetZoom());
document.getElementById('clear-search').addEventListener('click', clearSearch);
window.addEventListener('keydown', (e) => {
  if (e.key === 'F3' || ((e.ctrlKey || e.metaKey) && e.key === 'f')) {
    e.preventDefault();
    input.focus();
    input.select();
  } else if (e.key === 'Escape') {
    clearSearch();
    chart.resetZoom();
  }
});

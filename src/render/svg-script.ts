// The script and style embedded in every SVG flame graph: click to zoom, Reset Zoom, search (Ctrl-F, F3 or the
// Search button) with highlight and matched percentage, Escape to clear, hover details. Takes the numbers the
// script needs; gives the text of the <script> and <style> elements. Frames carry their position in samples as
// `fg:x`, `fg:w` and `fg:d` (depth), and their full name in <title>, so the script needs no other data.
import { jsonForScript } from './frames.js';

export interface SvgScriptParameters {
  width: number;
  xpad: number;
  total: number;
  fontSize: number;
  fontWidth: number;
  searchColor: string;
  nameType: string;
}

/** The style sheet, without the font (set on the root element). */
export const svgStyle = `#frames>g{cursor:pointer}#frames>g:hover>rect{stroke:#000;stroke-width:0.5}
.hide{display:none}.parent{opacity:0.5}.button{cursor:pointer;fill:#406080}.button:hover{fill:#000}
#details,#matched{fill:#000}text{white-space:pre}`;

/** The script, to be placed after the frames (it runs at once, the elements it uses already parsed). */
export function svgScript(parameters: SvgScriptParameters): string {
  return `var P = ${jsonForScript(parameters)};${script}`;
}

// Written for any SVG viewer with ECMAScript 5: no arrow functions, no classes.
const script = String.raw`
(function () {
  var frames = document.getElementById('frames');
  var details = document.getElementById('details').firstChild;
  var unzoom = document.getElementById('unzoom');
  var searchButton = document.getElementById('search');
  var matched = document.getElementById('matched').firstChild;
  var eps = P.total * 1e-9;
  var searching = false;

  function frameOf(node) {
    while (node && node !== frames) {
      if (node.parentNode === frames) return node;
      node = node.parentNode;
    }
    return null;
  }
  function num(g, name) { return +g.getAttribute('fg:' + name); }
  function nameOf(g) {
    var t = g.firstChild.firstChild ? g.firstChild.firstChild.nodeValue : '';
    var i = t.lastIndexOf(' (');
    return i < 0 ? t : t.slice(0, i);
  }
  function truncate(text, width) {
    var max = Math.floor(width / (P.fontSize * P.fontWidth));
    if (text.length <= max) return text;
    if (max < 3) return '';
    var end = max - 2, c = text.charCodeAt(end - 1);
    if (c >= 0xd800 && c <= 0xdbff) end--;
    return text.slice(0, end) + '..';
  }
  function place(g, x, w) {
    var rect = g.childNodes[1], label = g.childNodes[2];
    rect.setAttribute('x', x.toFixed(2));
    rect.setAttribute('width', w.toFixed(2));
    label.setAttribute('x', (x + 3).toFixed(2));
    label.textContent = truncate(nameOf(g), w);
  }
  function zoom(target) {
    var x0 = num(target, 'x'), w0 = num(target, 'w'), d0 = num(target, 'd');
    var full = P.width - 2 * P.xpad, scale = full / w0;
    for (var g = frames.firstElementChild; g; g = g.nextElementSibling) {
      var x = num(g, 'x'), w = num(g, 'w'), d = num(g, 'd');
      if (d < d0 && x <= x0 + eps && x + w >= x0 + w0 - eps) {
        g.setAttribute('class', 'parent');
        place(g, P.xpad, full);
      } else if (d >= d0 && x >= x0 - eps && x + w <= x0 + w0 + eps) {
        g.removeAttribute('class');
        place(g, P.xpad + (x - x0) * scale, w * scale);
      } else {
        g.setAttribute('class', 'hide');
      }
    }
    if (d0 === 0) unzoom.setAttribute('class', 'button hide');
    else unzoom.setAttribute('class', 'button');
  }
  function resetZoom() { zoom(frames.firstElementChild); }
  function search(term) {
    var re;
    try { re = new RegExp(term); } catch (e) { re = new RegExp(term.replace(/[.*+?^$()|[\]{}\\]/g, '\\$&')); }
    clearSearch();
    var hits = [];
    for (var g = frames.firstElementChild; g; g = g.nextElementSibling) {
      if (!re.test(nameOf(g))) continue;
      var rect = g.childNodes[1];
      rect.setAttribute('data-fill', rect.getAttribute('fill'));
      rect.setAttribute('fill', P.searchColor);
      hits.push([num(g, 'x'), num(g, 'w')]);
    }
    // Frames that overlap are nested: count only the outermost of each nest.
    hits.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
    var sum = 0, end = -Infinity;
    for (var i = 0; i < hits.length; i++) {
      if (hits[i][0] < end - eps) continue;
      sum += hits[i][1];
      end = hits[i][0] + hits[i][1];
    }
    searching = true;
    searchButton.firstChild.nodeValue = 'Reset Search';
    matched.nodeValue = 'Matched: ' + (100 * sum / P.total).toFixed(1) + '%';
  }
  function clearSearch() {
    for (var g = frames.firstElementChild; g; g = g.nextElementSibling) {
      var rect = g.childNodes[1];
      if (!rect.hasAttribute('data-fill')) continue;
      rect.setAttribute('fill', rect.getAttribute('data-fill'));
      rect.removeAttribute('data-fill');
    }
    searching = false;
    searchButton.firstChild.nodeValue = 'Search';
    matched.nodeValue = ' ';
  }
  function promptSearch() {
    var term = window.prompt('Search for a frame (regular expression, e.g. ^System\\.Text)', '');
    if (term) search(term);
  }

  frames.addEventListener('click', function (e) { var g = frameOf(e.target); if (g) zoom(g); });
  frames.addEventListener('mouseover', function (e) {
    var g = frameOf(e.target);
    if (g) details.nodeValue = P.nameType + ' ' + g.firstChild.textContent;
  });
  frames.addEventListener('mouseout', function () { details.nodeValue = ' '; });
  unzoom.addEventListener('click', resetZoom);
  searchButton.addEventListener('click', function () { if (searching) clearSearch(); else promptSearch(); });
  window.addEventListener('keydown', function (e) {
    var key = e.key || '';
    if (key === 'F3' || e.keyCode === 114 || ((e.ctrlKey || e.metaKey) && (key.toLowerCase() === 'f' || e.keyCode === 70))) {
      e.preventDefault();
      promptSearch();
    } else if (key === 'Escape' || e.keyCode === 27) {
      clearSearch();
      resetZoom();
    }
  });
})();
`;

/**
 * The interactive page's own script: it wires the views d3 and d3-flame-graph draw (inlined
 * before it, page/assets.ts) to the data page/data.ts wrote. Views: the heap chart, whose
 * brush picks a time range; the flame graph (click zooms, search highlights, a mode picks the
 * figure); the top-down and bottom-up trees; callers and callees of the selected function.
 * The flame graph is an icicle: the outermost frames on the top row, callees below, as wide as
 * its box and no taller than most of the window (deeper rows scroll inside the box). With a
 * second run (report --diff) it is differential: widths are the new run's, red frames grew and
 * blue ones shrank against the base (deeper: more), and the heap chart draws the base's heap.
 * Axis ticks come from axis.ts, inlined (AXIS_SOURCE): 1-2-5 steps, one unit per axis.
 *
 * It is plain ES2020 in a string (the page loads no module): no template literals inside.
 * The page exposes its state on window.heaphookPage for tests and the curious.
 *
 * A timeline cell's numbers are read by name, never by position: CELL gives each column of
 * TIMELINE_COLUMNS (decode/replay.ts, checked against C's HH_TIMELINE_COLUMNS) its offset in a
 * cell, and LEAKED each column of a leaked-block cell (LEAKED_COLUMNS, page/data.ts), both
 * written into the script from those lists; RANGE_COLUMN, typed against them, is the column
 * each mode sums over a brushed range. Adding or moving a column moves the offsets with it.
 */
import { TIMELINE_COLUMNS, type TimelineColumn } from '../../decode/replay.js';
import { AXIS_SOURCE } from '../axis.js';
import { LEAKED_COLUMNS } from './data.js';

/** The flame graph's modes (MODES in the script). */
type PageMode = 'bytes' | 'allocations' | 'peak' | 'leaked' | 'temporary' | 'net';

/** The timeline column a mode sums over a brushed range: net, and leaked without a leak check
 * (never freed), are the bytes still live at the end. */
const RANGE_COLUMN: Readonly<Record<PageMode, TimelineColumn>> = {
  bytes: 'bytes',
  allocations: 'allocations',
  peak: 'liveAtPeak',
  leaked: 'liveAtEnd',
  temporary: 'temporary',
  net: 'liveAtEnd',
};

/** Each name of `columns` with its offset in a cell, as the text of a script object. */
function offsetsOf(columns: readonly string[]): string {
  return JSON.stringify(Object.fromEntries(columns.map((name, offset) => [name, offset])));
}

export const PAGE_SCRIPT = String.raw`
(function () {
  'use strict';
  ${AXIS_SOURCE}
  var data = JSON.parse(document.getElementById('heaphook-data').textContent);
  var FRAMES = data.frames;
  var RUNS = data.runs;
  var DIFF = RUNS.length > 1;
  var BRUSHABLE = !DIFF && RUNS[0].timeline !== null;
  var MODES = {
    bytes: { label: 'allocated bytes', unit: 'bytes' },
    allocations: { label: 'allocations', unit: 'count' },
    peak: { label: 'peak contribution', unit: 'bytes' },
    leaked: { label: 'leaked', unit: 'bytes' },
    temporary: { label: 'temporary allocations', unit: 'count' },
    net: { label: 'never freed (live at the end)', unit: 'bytes' }
  };

  // a cell's columns by name (their offsets; the script's header comment says why)
  var CELL = ${offsetsOf(TIMELINE_COLUMNS)};
  var LEAKED = ${offsetsOf(LEAKED_COLUMNS)};
  var LEAKED_FIELDS = ${LEAKED_COLUMNS.length};
  var RANGE_COLUMN = ${JSON.stringify(RANGE_COLUMN)};

  var ROWS_SHOWN = 50;
  var state = { mode: 'bytes', range: null, selected: null, search: '' };

  function el(id) { return document.getElementById(id); }
  function fmtBytes(n) {
    var a = Math.abs(n), units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'], u = 0;
    while (a >= 1024 && u < units.length - 1) { a /= 1024; u++; }
    return (n < 0 ? '-' : '') + (u === 0 ? String(a) : a.toFixed(1)) + ' ' + units[u];
  }
  function fmtCount(n) { return Math.round(n).toLocaleString('en-US'); }
  function fmt(n, unit) { return unit === 'bytes' ? fmtBytes(n) : fmtCount(n); }
  function fmtTime(ns) {
    if (ns === 0) return '0 s';
    if (ns >= 1e9) return (ns / 1e9).toFixed(3) + ' s';
    if (ns >= 1e6) return (ns / 1e6).toFixed(2) + ' ms';
    return (ns / 1e3).toFixed(1) + ' µs';
  }
  function signed(n, unit) { return (n > 0 ? '+' : '') + fmt(n, unit); }

  // Per run: every site's stack as frame ids, outermost first.
  RUNS.forEach(function (run) {
    var memo = new Map();
    function pathOf(node) {
      var p = memo.get(node);
      if (p !== undefined) return p;
      var out = [];
      for (var n = node; n >= 0; n = run.nodeParent[n]) out.push(run.nodeFrame[n]);
      out.reverse();
      memo.set(node, out);
      return out;
    }
    run.paths = run.sites.node.map(pathOf);
    // a range's values come per row when the page folded sites into their callers
    run.rowPaths = run.timeline !== null && run.timeline.rows !== null ? run.timeline.rows.map(pathOf) : null;
  });

  /** The stacks siteValues(runIndex) gives values for: the sites', or with a range on a page
   * whose timeline folded sites into their callers, the rows'. */
  function pathsOf(runIndex) {
    var run = RUNS[runIndex];
    return runIndex === 0 && state.range !== null && run.rowPaths !== null ? run.rowPaths : run.paths;
  }

  /** The figures of the current mode per site of a run (the range applies to the first run). */
  function siteValues(runIndex) {
    var run = RUNS[runIndex], s = run.sites, mode = state.mode;
    if (runIndex === 0 && state.range !== null && run.timeline !== null) {
      var rows = run.timeline.rows;
      var v = new Float64Array(rows !== null ? rows.length : s.node.length), c = run.timeline.cells, k = run.timeline.fields;
      var b0 = state.range[0], b1 = state.range[1];
      if (mode === 'leaked' && run.leakSource === 'leak-check') {
        // the check's leaked blocks by the bucket they were allocated in
        var l = run.timeline.leaked;
        for (var j = 0; j < l.length; j += LEAKED_FIELDS) {
          var lb = l[j + LEAKED.bucket];
          if (lb >= b0 && lb <= b1) v[l[j + LEAKED.site]] += l[j + LEAKED.bytes];
        }
        return v;
      }
      // the site's (or, with rows, the row's) index is the cell's site column
      var figure = CELL[RANGE_COLUMN[mode]];
      for (var i = 0; i < c.length; i += k) {
        var b = c[i + CELL.bucket];
        if (b < b0 || b > b1) continue;
        v[c[i + CELL.site]] += c[i + figure];
      }
      return v;
    }
    return mode === 'net' ? s.live : s[mode];
  }

  /** The flame tree: { name, value, delta, children } (values inclusive), for d3-flame-graph. */
  function flameTree() {
    var root = { name: 'all', value: 0, delta: 0, self: 0, children: [], kids: new Map() };
    function add(runIndex, sign) {
      var values = siteValues(runIndex), paths = pathsOf(runIndex);
      for (var i = 0; i < values.length; i++) {
        var v = values[i];
        if (!v || v < 0) continue;
        var path = paths[i], node = root;
        if (sign > 0) node.value += v;
        node.delta += sign * v;
        for (var k = 0; k < path.length; k++) {
          var child = node.kids.get(path[k]);
          if (child === undefined) {
            child = { name: FRAMES[path[k]], value: 0, delta: 0, self: 0, children: [], kids: new Map() };
            node.kids.set(path[k], child);
            node.children.push(child);
          }
          if (sign > 0) child.value += v;
          child.delta += sign * v;
          node = child;
        }
        if (sign > 0) node.self += v;
      }
    }
    add(0, 1);
    if (DIFF) add(1, -1);
    return root;
  }

  /** The inverted tree (allocating function at the root, callers below), and per function
   * its total (once per stack, recursion counted once), callers and callees. */
  function invertedTree() {
    var root = { name: 'all', value: 0, kids: new Map() };
    var values = siteValues(0), paths = pathsOf(0);
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (!v || v < 0) continue;
      var path = paths[i], node = root;
      root.value += v;
      for (var k = path.length - 1; k >= 0; k--) {
        var child = node.kids.get(path[k]);
        if (child === undefined) {
          child = { name: FRAMES[path[k]], value: 0, kids: new Map() };
          node.kids.set(path[k], child);
        }
        child.value += v;
        node = child;
      }
    }
    return root;
  }

  function callersAndCallees(name) {
    var callers = new Map(), callees = new Map(), total = 0;
    var values = siteValues(0), paths = pathsOf(0);
    for (var i = 0; i < values.length; i++) {
      var v = values[i];
      if (!v || v < 0) continue;
      var path = paths[i];
      for (var k = 0; k < path.length; k++) {
        if (FRAMES[path[k]] !== name) continue;
        total += v;
        var caller = k > 0 ? FRAMES[path[k - 1]] : '(root)';
        var callee = k + 1 < path.length ? FRAMES[path[k + 1]] : '(allocates itself)';
        callers.set(caller, (callers.get(caller) || 0) + v);
        callees.set(callee, (callees.get(callee) || 0) + v);
        break;
      }
    }
    return { total: total, callers: callers, callees: callees };
  }

  // ---- The flame graph -------------------------------------------------------------------
  var chart = null;
  var root = null;
  var flameWidth = 0;
  /** The largest change of a frame against the base (the colours' full depth). */
  var maxDelta = 0;
  /** A frame's colour on the differential graph: red grew, blue shrank, grey the same; the
   * larger the change against the largest, the deeper the colour. */
  function diffColour(d) {
    if (d.highlight) return '#E600E6';
    var delta = d.data.delta || 0;
    if (delta === 0 || maxDelta === 0) return 'rgb(215,215,215)';
    var t = 0.25 + 0.6 * Math.min(1, Math.abs(delta) / maxDelta);
    var o = Math.round(235 * (1 - t));
    return delta > 0 ? 'rgb(255,' + o + ',' + o + ')' : 'rgb(' + o + ',' + o + ',255)';
  }
  function drawFlame() {
    root = flameTree();
    var unit = MODES[state.mode].unit;
    var box = el('explore-flame');
    box.textContent = '';
    flameWidth = box.clientWidth || 960;
    maxDelta = 0;
    if (DIFF) (function walk(n, depth) {
      if (depth > 0) maxDelta = Math.max(maxDelta, Math.abs(n.delta));
      n.children.forEach(function (c) { walk(c, depth + 1); });
    })(root, 0);
    chart = flamegraph.default()
      .width(flameWidth)
      .inverted(true)
      .cellHeight(18)
      .transitionDuration(0)
      .minFrameSize(1)
      .sort(function (a, b) { return b.value - a.value; })
      .title('')
      .setSearchHandler(function (results, sum, total) {
        var n = results.length;
        el('search-result').textContent = state.search === '' ? '' :
          n + ' frame' + (n === 1 ? '' : 's') + ' match, ' + fmt(sum, unit) +
          (total > 0 ? ' (' + (100 * sum / total).toFixed(1) + ' %)' : '');
        el('search-result').dataset.matches = String(n);
      })
      .label(function (d) {
        var line = d.data.name + ': ' + fmt(d.value, unit) +
          (root.value > 0 ? ' (' + (100 * d.value / root.value).toFixed(2) + ' %)' : '');
        if (DIFF) line += ', ' + signed(d.data.delta, unit) + ' against the base';
        return line;
      })
      .onClick(function (d) {
        el('explore-flame').dataset.zoomed = d.data.name;
        if (d.depth > 0) select(d.data.name);
      });
    if (DIFF) chart.setColorMapper(diffColour);
    d3.select(box).datum(root).call(chart);
    el('explore-flame').dataset.zoomed = '';
    el('flame-total').textContent = MODES[state.mode].label + ': ' + fmt(root.value, unit) +
      (DIFF ? ' (' + signed(root.delta, unit) + ' against the base)' : '') +
      (state.range !== null ? ', allocated in the range' : '');
    el('flame-total').dataset.total = String(root.value);
    if (state.search !== '') chart.search(state.search);
  }

  // ---- The trees and caller/callee tables ------------------------------------------------
  function treeRows(tbody, nodes, depth, unit, withSelf) {
    var all = Array.from(nodes).filter(function (n) { return n.value > 0; })
      .sort(function (a, b) { return b.value - a.value; });
    var list = all.slice(0, ROWS_SHOWN);
    var frag = document.createDocumentFragment();
    list.forEach(function (n) {
      var tr = document.createElement('tr');
      tr.className = 'tree-row';
      tr.dataset.depth = String(depth);
      tr.dataset.value = String(n.value);
      var name = document.createElement('td');
      name.className = 'fn';
      name.style.paddingLeft = (6 + depth * 14) + 'px';
      var kids = n.kids ? Array.from(n.kids.values()) : n.children;
      name.textContent = (kids.length > 0 ? '▸ ' : '  ') + n.name;
      name.title = n.name;
      tr.appendChild(name);
      var total = document.createElement('td');
      total.className = 'num';
      total.textContent = fmt(n.value, unit);
      tr.appendChild(total);
      if (withSelf) {
        var self = document.createElement('td');
        self.className = 'num';
        self.textContent = fmt(n.self, unit);
        tr.appendChild(self);
      }
      if (DIFF && withSelf) {
        var delta = document.createElement('td');
        delta.className = 'num';
        delta.textContent = signed(n.delta, unit);
        tr.appendChild(delta);
      }
      var open = null;
      name.addEventListener('click', function () {
        select(n.name);
        if (open !== null) {
          open.forEach(function (r) { r.remove(); });
          open = null;
          name.textContent = '▸ ' + n.name;
          return;
        }
        if (kids.length === 0) return;
        var sub = document.createElement('tbody');
        treeRows(sub, kids, depth + 1, unit, withSelf);
        open = Array.from(sub.children);
        var after = tr;
        open.forEach(function (r) { after.after(r); after = r; });
        name.textContent = '▾ ' + n.name;
      });
      frag.appendChild(tr);
    });
    if (all.length > list.length) {
      var rest = 0;
      for (var i = list.length; i < all.length; i++) rest += all[i].value;
      var more = document.createElement('tr');
      more.className = 'tree-row more';
      more.dataset.depth = String(depth);
      more.dataset.value = String(rest);
      var label = document.createElement('td');
      label.style.paddingLeft = (6 + depth * 14) + 'px';
      label.textContent = '… ' + (all.length - list.length) + ' more';
      var value = document.createElement('td');
      value.className = 'num';
      value.textContent = fmt(rest, unit);
      more.appendChild(label);
      more.appendChild(value);
      frag.appendChild(more);
    }
    tbody.appendChild(frag);
  }

  function drawTrees() {
    var unit = MODES[state.mode].unit;
    var td = el('top-down').querySelector('tbody');
    td.textContent = '';
    treeRows(td, root.children, 0, unit, true);
    var bu = el('bottom-up').querySelector('tbody');
    bu.textContent = '';
    treeRows(bu, invertedTree().kids.values(), 0, unit, false);
    drawCallers();
  }

  function drawCallers() {
    var unit = MODES[state.mode].unit;
    var name = state.selected;
    el('selected').textContent = name === null ? 'none: click a function in a tree or the flame graph' : name;
    ['callers', 'callees'].forEach(function (id) { el(id).querySelector('tbody').textContent = ''; });
    if (name === null) return;
    var cc = callersAndCallees(name);
    el('selected').textContent = name + ' — ' + fmt(cc.total, unit);
    [['callers', cc.callers], ['callees', cc.callees]].forEach(function (pair) {
      var tbody = el(pair[0]).querySelector('tbody');
      Array.from(pair[1].entries()).sort(function (a, b) { return b[1] - a[1]; }).slice(0, ROWS_SHOWN)
        .forEach(function (e) {
          var tr = document.createElement('tr');
          var a = document.createElement('td');
          a.className = 'fn';
          a.textContent = e[0];
          if (e[0].charAt(0) !== '(') a.addEventListener('click', function () { select(e[0]); });
          var b = document.createElement('td');
          b.className = 'num';
          b.textContent = fmt(e[1], unit);
          tr.appendChild(a);
          tr.appendChild(b);
          tbody.appendChild(tr);
        });
    });
  }

  function select(name) {
    state.selected = name;
    drawCallers();
  }

  // ---- The heap chart and its brush ------------------------------------------------------
  var x = null;
  function drawHeapChart() {
    var run = RUNS[0], base = DIFF ? RUNS[1] : null, box = el('explore-heap');
    box.textContent = '';
    var width = box.clientWidth || 960, height = 200;
    var m = { left: 70, right: 24, top: 10, bottom: 30 };
    var end = Math.max(run.endTimeNs, base ? base.endTimeNs : 0, 1);
    var times = timeAxis(end, Math.max(2, Math.min(10, Math.floor(width / 110))));
    x = d3.scaleLinear().domain([0, times.ticks[times.ticks.length - 1]]).range([m.left, width - m.right]);
    var top = Math.max(d3.max(run.series.max) || 0, run.mapped ? d3.max(run.mapped.max) || 0 : 0,
      base ? d3.max(base.series.max) || 0 : 0, 1);
    var bytes = byteAxis(top, 5);
    var y = d3.scaleLinear().domain([0, bytes.ticks[bytes.ticks.length - 1]]).range([height - m.bottom, m.top]);
    var svg = d3.select(box).append('svg').attr('width', width).attr('height', height)
      .attr('id', 'explore-heap-svg').attr('role', 'img').attr('aria-label', 'heap over time');
    var pts = run.series.time.map(function (t, i) { return [t, run.series.max[i]]; });
    svg.append('path').datum(pts).attr('class', 'heap-area')
      .attr('d', d3.area().curve(d3.curveStepAfter).x(function (p) { return x(p[0]); })
        .y0(y(0)).y1(function (p) { return y(p[1]); }));
    if (run.mapped !== null) {
      var mp = run.mapped.time.map(function (t, i) { return [t, run.mapped.max[i]]; });
      svg.append('path').datum(mp).attr('class', 'mapped-line')
        .attr('d', d3.line().curve(d3.curveStepAfter).x(function (p) { return x(p[0]); }).y(function (p) { return y(p[1]); }));
    }
    if (base !== null) {
      var bp = base.series.time.map(function (t, i) { return [t, base.series.max[i]]; });
      svg.append('path').datum(bp).attr('class', 'base-line')
        .attr('d', d3.line().curve(d3.curveStepAfter).x(function (p) { return x(p[0]); }).y(function (p) { return y(p[1]); }));
    }
    svg.append('g').attr('class', 'x-axis').attr('transform', 'translate(0,' + (height - m.bottom) + ')')
      .call(d3.axisBottom(x).tickValues(times.ticks).tickFormat(function (t, i) { return times.labels[i]; }));
    svg.append('g').attr('class', 'y-axis').attr('transform', 'translate(' + m.left + ',0)')
      .call(d3.axisLeft(y).tickValues(bytes.ticks).tickFormat(function (b, i) { return bytes.labels[i]; }));
    svg.append('line').attr('class', 'peak-mark').attr('x1', x(run.peakTimeNs)).attr('x2', x(run.peakTimeNs))
      .attr('y1', m.top).attr('y2', height - m.bottom);
    if (!BRUSHABLE) {
      el('clear-range').hidden = true;
      return;
    }
    var brush = d3.brushX().extent([[m.left, m.top], [width - m.right, height - m.bottom]])
      .on('end', function (event) {
        if (!event.sourceEvent) return;
        if (event.selection === null) { setRange(null); return; }
        setRange([x.invert(event.selection[0]), x.invert(event.selection[1])]);
      });
    svg.append('g').attr('class', 'brush').call(brush);
    clearBrush = function () { svg.select('.brush').call(brush.move, null); };
    if (state.range !== null) {
      var w = run.timeline.width;
      svg.select('.brush').call(brush.move, [x(state.range[0] * w), Math.min(x((state.range[1] + 1) * w), width - m.right)]);
    }
  }
  var clearBrush = function () {};
  el('clear-range').addEventListener('click', function () {
    clearBrush();
    setRange(null);
  });

  /** A range of times, as the timeline's buckets it touches. */
  function setRange(times) {
    var tl = RUNS[0].timeline;
    if (times === null) {
      state.range = null;
      el('range').textContent = BRUSHABLE ? 'the whole run (brush the chart to pick a time range)' :
        DIFF ? 'the whole run (time ranges: in each run\'s own report)' : 'the whole run (this log has no timeline)';
      el('range').dataset.range = '';
    } else {
      var b0 = Math.max(0, Math.floor(times[0] / tl.width));
      var b1 = Math.max(b0, Math.floor(times[1] / tl.width));
      state.range = [b0, b1];
      el('range').textContent = 'from ' + fmtTime(b0 * tl.width) + ' to ' + fmtTime((b1 + 1) * tl.width) +
        ' (the timeline\'s buckets are ' + fmtTime(tl.width) + ' wide' +
        (tl.rows !== null ? '; with this many sites, a range shows the top of the stacks, not the deepest frames' : '') + ')';
      el('range').dataset.range = b0 + '-' + b1;
    }
    redraw();
  }

  function redraw() {
    var t0 = performance.now();
    drawFlame();
    drawTrees();
    window.heaphookPage.lastRenderMs = performance.now() - t0;
  }

  // ---- Controls --------------------------------------------------------------------------
  var modeSelect = el('mode');
  Object.keys(MODES).forEach(function (k) {
    var o = document.createElement('option');
    o.value = k;
    o.textContent = MODES[k].label;
    modeSelect.appendChild(o);
  });
  modeSelect.addEventListener('change', function () { state.mode = modeSelect.value; redraw(); });
  el('search').addEventListener('input', function () {
    state.search = el('search').value.trim();
    if (state.search === '') { chart.clear(); el('search-result').textContent = ''; el('search-result').dataset.matches = '0'; }
    else chart.search(state.search);
  });
  el('reset-zoom').addEventListener('click', function () { chart.resetZoom(); el('explore-flame').dataset.zoomed = ''; });

  // A new width (the window resized, a scrollbar came or went): the views follow it.
  if (typeof ResizeObserver === 'function') {
    new ResizeObserver(function () {
      var w = el('explore-flame').clientWidth;
      if (chart !== null && w > 0 && w !== flameWidth) {
        drawHeapChart();
        drawFlame();
      }
    }).observe(el('explore-flame'));
  }

  window.heaphookPage = {
    state: state,
    /** The chart's x pixel (in the page) of a time, ns: where to brush. */
    pageXOf: function (ns) { var r = el('explore-heap-svg').getBoundingClientRect(); return r.left + x(ns); },
    lastRenderMs: 0
  };
  drawHeapChart();
  setRange(null);
  window.heaphookPage.readyMs = performance.now();
  window.heaphookPage.ready = true;
})();
`;

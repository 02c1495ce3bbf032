/// <reference lib="dom" />
/**
 * The interactive report.html in headless Chromium (Debian's, driven by puppeteer-core), with
 * real clicks, typing and mouse drags, on a recorded python3 run whose two phases allocate at
 * distinct sites (four bytearrays, a pause, three bytes objects), on a 10,000,000-event log,
 * and on report --diff pages. Every page must load nothing (each request is watched) and log
 * no console error. The first screen of each (a laptop's 1280×800 window, and a narrow one) is
 * photographed and probed: the flame graph's root row is painted inside its box in the window,
 * no frame runs past the box, and no element overflows its container (bounding boxes), unless
 * that container scrolls.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { TIMELINE_COLUMNS, TIMELINE_FIELDS, type TimelineColumn } from '../../src/decode/replay.js';
import type { ReportJson } from '../../src/report/json.js';
import {
  pageDataScript,
  pageTimeline,
  type PageData,
  type PageRun,
} from '../../src/report/page/data.js';
import { buildReportModel } from '../../src/report/run.js';
import { heaphookBin, logsIn, python3, scratch, traced, workload } from '../helpers.js';

const CHROMIUM = '/usr/bin/chromium';

/** Phase 1: four 1,000,000-byte bytearrays (PyByteArray_Resize); a pause; phase 2: three
 * 3,000,000-byte bytes objects (bytes_repeat). */
const TWO_PHASES =
  'import time\nkeep = [bytearray(1000000) for _ in range(4)]\ntime.sleep(1.5)\nmore = [b"x" * 3000000 for _ in range(3)]';

function heaphook(args: readonly string[]) {
  const r = spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    timeout: 300_000,
    maxBuffer: 256 * 1024 * 1024,
  });
  expect(r.status, r.stderr).toBe(0);
  return r;
}

/** The one log of a traced command in a fresh folder. */
function record(name: string, command: string, args: readonly string[]): string {
  const dir = scratch(name);
  const r = traced(dir, command, args);
  expect(r.status, r.stderr).toBe(0);
  const logs = logsIn(dir);
  expect(logs).toHaveLength(1);
  return logs[0]!;
}

function reportTo(log: string, extra: readonly string[] = []): { html: string; json: ReportJson } {
  const out = `${log}.out`;
  const r = heaphook(['report', log, '-o', out, '--json', ...extra]);
  return { html: join(out, 'report.html'), json: JSON.parse(r.stdout) as ReportJson };
}

function pageData(html: string): PageData {
  const text = readFileSync(html, 'utf8');
  const m = /<script type="application\/json" id="heaphook-data">(.*?)<\/script>/s.exec(text);
  return JSON.parse(m![1]!) as PageData;
}

let browser: Browser;
beforeAll(async () => {
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu'],
  });
});
afterAll(async () => {
  await browser?.close();
});

interface Opened {
  page: Page;
  /** Console errors and uncaught exceptions. */
  errors: string[];
  /** Requests other than the page itself (each one refused). */
  requests: string[];
  /** ms from navigation to the page's views drawn. */
  firstRenderMs: number;
}

async function open(html: string): Promise<Opened> {
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 1000 });
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(m.text());
  });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.setRequestInterception(true);
  page.on('request', (r) => {
    if (r.url() === `file://${html}`) void r.continue();
    else {
      requests.push(r.url());
      void r.abort();
    }
  });
  const start = Date.now();
  await page.goto(`file://${html}`, { waitUntil: 'load' });
  await page.waitForFunction('window.heaphookPage && window.heaphookPage.ready === true', {
    timeout: 60_000,
  });
  return { page, errors, requests, firstRenderMs: Date.now() - start };
}

/** Waits until the flame graph's frames stop moving (d3 animates a redraw over ~250 ms):
 * the same widths at two polls 100 ms apart. */
async function settled(page: Page): Promise<void> {
  await page.waitForFunction(
    () => {
      const w = window as unknown as { lastWidths?: string };
      const widths = Array.from(document.querySelectorAll('#explore-flame rect'))
        .map((r) => r.getAttribute('width'))
        .join(',');
      const same = w.lastWidths === widths;
      w.lastWidths = widths;
      return same;
    },
    { polling: 100, timeout: 10_000 },
  );
}

/** The fill of the widest frame of a function, as [r, g, b]. */
async function frameColour(page: Page, name: string): Promise<[number, number, number]> {
  const fill = await page.$$eval(`#explore-flame g.frame[name="${name}"] rect`, (rs) => {
    const width = (r: Element) => Number(r.getAttribute('width'));
    return rs.sort((a, b) => width(b) - width(a))[0]?.getAttribute('fill') ?? '';
  });
  const rgb = (/rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(fill) ?? []).slice(1).map(Number);
  expect(rgb, fill).toHaveLength(3);
  return rgb as [number, number, number];
}

/** The flame graph's total, as the page shows it. */
async function flameTotal(page: Page): Promise<number> {
  return Number(await page.$eval('#flame-total', (e) => (e as HTMLElement).dataset.total));
}

/** Names of the frames the flame graph draws (wider than nothing). */
async function flameNames(page: Page): Promise<string[]> {
  return page.$$eval('#explore-flame g.frame', (gs) =>
    gs
      .filter((g) => Number(g.querySelector('rect')?.getAttribute('width') ?? 0) > 0)
      .map((g) => g.getAttribute('name') ?? ''),
  );
}

/** Sum of the top-level rows of a tree table, as the figures' raw numbers the page keeps. */
async function treeTopTotal(page: Page, id: string): Promise<number> {
  return page.$eval(`#${id} tbody`, (tbody) =>
    Array.from(tbody.querySelectorAll('tr[data-depth="0"]')).reduce(
      (n, tr) => n + Number((tr as HTMLElement).dataset.value),
      0,
    ),
  );
}

/** Drags the mouse across the heap chart from one time to another (ns). */
async function brush(page: Page, fromNs: number, toNs: number): Promise<void> {
  await page.$eval('#explore-heap', (e) => e.scrollIntoView({ block: 'center' }));
  const [x0, x1, y] = await page.evaluate(
    (a: number, b: number) => {
      const h = (window as unknown as { heaphookPage: { pageXOf(ns: number): number } })
        .heaphookPage;
      const r = document.getElementById('explore-heap-svg')!.getBoundingClientRect();
      return [h.pageXOf(a), h.pageXOf(b), r.top + r.height / 2] as [number, number, number];
    },
    fromNs,
    toNs,
  );
  await page.mouse.move(x0, y);
  await page.mouse.down();
  await page.mouse.move(x1, y, { steps: 8 });
  await page.mouse.up();
  await settled(page);
}

async function typeSearch(page: Page, term: string): Promise<number> {
  await page.$eval('#search', (e) => ((e as HTMLInputElement).value = ''));
  await page.type('#search', term);
  return Number(
    await page.$eval('#search-result', (e) => (e as HTMLElement).dataset.matches ?? '0'),
  );
}

interface FirstScreen {
  /** Elements outside their parent's box (and no ancestor scrolls that way), described. */
  overflowing: string[];
  /** The flame graph's root row and its box (client area), in window coordinates. */
  root: { top: number; bottom: number; left: number; right: number } | null;
  box: { top: number; bottom: number; left: number; right: number };
  /** Whether the root row is what the window paints at its centre. */
  rootPainted: boolean;
  /** Frames drawn (wider than nothing) past the box's right or left edge. */
  framesPastBox: number;
  windowHeight: number;
}

/** The first screen of a page in a window of `width`×`height`, once the views have followed
 * the window's width: a screenshot beside the page (first-screen-WxH.png) and the probe. */
async function firstScreen(
  page: Page,
  html: string,
  width: number,
  height: number,
): Promise<FirstScreen> {
  await page.setViewport({ width, height });
  await page.evaluate(() => window.scrollTo(0, 0));
  // the views redraw at the new width (a ResizeObserver): wait for the flame graph to fit
  await page.waitForFunction(
    () => {
      const box = document.getElementById('explore-flame')!;
      const svg = box.querySelector('svg');
      return svg !== null && Number(svg.getAttribute('width')) === box.clientWidth;
    },
    { timeout: 10_000 },
  );
  await settled(page);
  await page.screenshot({ path: join(dirname(html), `first-screen-${width}x${height}.png`) });
  return page.evaluate(() => {
    const name = (e: Element): string =>
      e.tagName.toLowerCase() +
      (e.id !== '' ? `#${e.id}` : '') +
      Array.from(e.classList)
        .map((c) => `.${c}`)
        .join('');
    const overflowing: string[] = [];
    for (const e of Array.from(document.body.querySelectorAll('*'))) {
      if (e.closest('noscript, script, style') !== null) continue;
      if (e.parentElement?.closest('svg')) continue; // inside a chart: frames are checked below
      if (!e.checkVisibility()) continue;
      const r = e.getBoundingClientRect();
      if (r.width === 0 && r.height === 0) continue;
      const parent = e.parentElement!;
      const scrolls = (axis: 'overflowX' | 'overflowY'): boolean => {
        for (
          let a: Element | null = parent;
          a !== null && a !== document.body;
          a = a.parentElement
        ) {
          const o = getComputedStyle(a)[axis];
          if (o === 'auto' || o === 'scroll') return true;
        }
        return false;
      };
      const p =
        parent === document.body
          ? {
              left: 0,
              right: document.documentElement.clientWidth,
              top: -Infinity,
              bottom: Infinity,
            }
          : parent.getBoundingClientRect();
      const outX = r.left < p.left - 1 || r.right > p.right + 1;
      const outY = r.top < p.top - 1 || r.bottom > p.bottom + 1;
      if ((outX && !scrolls('overflowX')) || (outY && !scrolls('overflowY')))
        overflowing.push(
          `${name(e)} [${Math.round(r.left)}, ${Math.round(r.right)}] in ${name(parent)} [${Math.round(p.left)}, ${Math.round(p.right)}]`,
        );
    }
    const flame = document.getElementById('explore-flame')!;
    const fr = flame.getBoundingClientRect();
    const box = {
      top: fr.top + flame.clientTop,
      bottom: fr.top + flame.clientTop + flame.clientHeight,
      left: fr.left + flame.clientLeft,
      right: fr.left + flame.clientLeft + flame.clientWidth,
    };
    const d3 = (window as unknown as { d3: { select(e: Element): { datum(): { depth: number } } } })
      .d3;
    const frames = Array.from(flame.querySelectorAll('g.frame'));
    const rootFrame = frames.find((g) => d3.select(g).datum().depth === 0);
    let root: FirstScreen['root'] = null;
    let rootPainted = false;
    if (rootFrame !== undefined) {
      const r = rootFrame.querySelector('rect')!.getBoundingClientRect();
      root = { top: r.top, bottom: r.bottom, left: r.left, right: r.right };
      const hit = document.elementFromPoint((r.left + r.right) / 2, (r.top + r.bottom) / 2);
      rootPainted = hit !== null && rootFrame.contains(hit);
    }
    const framesPastBox = frames.filter((g) => {
      const r = g.querySelector('rect')!.getBoundingClientRect();
      return r.width > 0 && (r.left < box.left - 0.5 || r.right > box.right + 0.5);
    }).length;
    return { overflowing, root, box, rootPainted, framesPastBox, windowHeight: window.innerHeight };
  });
}

/** A first screen a person can read: the flame graph's root row in the window, inside its
 * box, nothing overflowing. */
async function expectReadableFirstScreen(
  page: Page,
  html: string,
  width: number,
  height: number,
): Promise<void> {
  const s = await firstScreen(page, html, width, height);
  expect(s.overflowing, `${width}x${height}`).toEqual([]);
  expect(s.root, 'the root row').not.toBeNull();
  expect(s.root!.top).toBeGreaterThanOrEqual(s.box.top - 0.5);
  expect(s.root!.bottom).toBeLessThanOrEqual(Math.min(s.box.bottom, s.windowHeight) + 0.5);
  expect(s.root!.left).toBeGreaterThanOrEqual(s.box.left - 0.5);
  expect(s.root!.right).toBeLessThanOrEqual(s.box.right + 0.5);
  expect(s.rootPainted, 'the root row is painted, not covered').toBe(true);
  expect(s.framesPastBox).toBe(0);
}

/** An axis' tick labels: one unit, steps of 1, 2 or 5 times a power of ten from 0. */
function expectHumanTicks(labels: readonly string[]): void {
  expect(labels.length).toBeGreaterThanOrEqual(2);
  const units = new Set(labels.map((l) => l.split(' ')[1]));
  expect(units.size, labels.join(' | ')).toBe(1);
  const values = labels.map((l) => Number(l.split(' ')[0]));
  const step = values[1]! - values[0]!;
  expect(values[0]).toBe(0);
  const mantissa = Number((step / 10 ** Math.floor(Math.log10(step))).toPrecision(6));
  expect([1, 2, 5], labels.join(' | ')).toContain(mantissa);
  values.forEach((v, i) => expect(v).toBeCloseTo(i * step, 6));
}

/** Each site's cells add up to its figures: allocations, bytes, bytes less freed = live,
 * temporary, live at the end, live at the peak. */
async function expectTimelineAddsUp(log: string): Promise<void> {
  const { model, timeline } = await buildReportModel(log, { progress: false, timeline: true });
  expect(timeline).not.toBeNull();
  const sums = model.sites.map(() => [0, 0, 0, 0, 0, 0]);
  const c = timeline!.cells;
  for (let i = 0; i < c.length; i += TIMELINE_FIELDS) {
    expect(c[i + 1]).toBeLessThan(timeline!.buckets);
    const row = sums[c[i]!]!;
    for (let k = 0; k < 6; k++) row[k] = row[k]! + c[i + 2 + k]!;
  }
  const [allocations, bytes, freed, temporary, liveAtEnd, atPeak] = [0, 1, 2, 3, 4, 5];
  model.sites.forEach((site, i) => {
    const sum = sums[i]!;
    expect(sum[allocations], `site ${i}`).toBe(site.allocations);
    expect(sum[bytes]).toBe(site.bytes);
    expect(sum[bytes]! - sum[freed]!).toBe(site.liveBytes);
    expect(sum[temporary]).toBe(site.temporary);
    expect(sum[liveAtEnd]).toBe(site.liveBytes);
    expect(sum[atPeak]).toBe(site.peakBytes);
  });
}

describe('the timeline', () => {
  it('adds up on threads trading blocks with moved reallocs, and on a sampled log', async () => {
    await expectTimelineAddsUp(record('html-trade', workload, ['trade', '4', '100000']));
    const dir = scratch('html-sampled');
    const r = traced(dir, workload, ['churn', '200000'], { HEAPHOOK_SAMPLE_BYTES: '4096' });
    expect(r.status, r.stderr).toBe(0);
    await expectTimelineAddsUp(logsIn(dir)[0]!);
  });
});

describe('report.html with a leak check (the exact-count workload)', () => {
  const log = record('html-leaks', workload, ['counts']); // the exit leak check is on by default
  const { html, json } = reportTo(log);

  it("places the check's leaked blocks in the buckets they were allocated in", async () => {
    expect(json.leakSource).toBe('leak-check');
    expect(json.leakedBytes).toBeGreaterThan(0);
    const run = pageData(html).runs[0]!;
    const bySite = new Map<number, number>();
    const l = run.timeline!.leaked;
    for (let i = 0; i < l.length; i += 3) bySite.set(l[i]!, (bySite.get(l[i]!) ?? 0) + l[i + 2]!);
    run.sites.leaked.forEach((bytes, site) => expect(bySite.get(site) ?? 0).toBe(bytes));
    const o = await open(html);
    const p = o.page;
    await p.select('#mode', 'leaked');
    expect(await flameTotal(p)).toBe(json.leakedBytes);
    await brush(p, json.durationNs * 0.002, json.durationNs * 1.1); // all of it, as a range
    expect(await p.$eval('#range', (e) => (e as HTMLElement).dataset.range)).toMatch(/^0-\d+$/);
    expect(await flameTotal(p)).toBe(json.leakedBytes);
    expect(o.errors).toEqual([]);
    expect(o.requests).toEqual([]);
    await p.close();
  });
});

describe('report.html on python3 in two phases', () => {
  const log = record('html-python', python3, ['-c', TWO_PHASES]);
  const { html, json } = reportTo(log);
  let o: Opened;
  beforeAll(async () => {
    o = await open(html);
  });
  afterAll(async () => {
    expect(o.errors).toEqual([]);
    expect(o.requests).toEqual([]);
    await o.page.close();
  });

  it("keeps a timeline whose cells add up to each site's figures", async () => {
    await expectTimelineAddsUp(log);
  });

  it("each mode's flame graph adds up to the report's figure for it", async () => {
    const p = o.page;
    const expected: Record<string, number> = {
      bytes: json.allocatedBytes,
      allocations: json.allocations + json.reallocs,
      peak: json.peakHeapBytes,
      leaked: json.leakedBytes,
      temporary: json.temporaryAllocations,
      net: json.neverFreedBytes,
    };
    for (const [mode, value] of Object.entries(expected)) {
      await p.select('#mode', mode);
      expect(await flameTotal(p), mode).toBe(value);
      expect(await treeTopTotal(p, 'top-down'), `top-down, ${mode}`).toBe(value);
      expect(await treeTopTotal(p, 'bottom-up'), `bottom-up, ${mode}`).toBe(value);
    }
    await p.select('#mode', 'bytes');
  });

  it('zooms on the clicked frame: it takes the full width, its callees drawn above it', async () => {
    const p = o.page;
    await settled(p);
    const full = Number(await p.$eval('#explore-flame svg', (svg) => svg.getAttribute('width')));
    // The frames start at each site's user frame (allocators are not drawn), so the bytearrays'
    // PyByteArray_Resize is a leaf: its widest caller is clicked, PyByteArray_Resize among its
    // callees.
    const [target, before] = await p.$$eval('#explore-flame g.frame', (gs) => {
      const d3 = (window as unknown as { d3: { select(e: Element): { datum(): FrameDatum } } }).d3;
      interface FrameDatum {
        data: { name: string };
        children?: FrameDatum[];
      }
      const width = (g: Element) => Number(g.querySelector('rect')!.getAttribute('width'));
      const callers = gs.filter((g) =>
        (d3.select(g).datum().children ?? []).some((c) => c.data.name === 'PyByteArray_Resize'),
      );
      const widest = callers.sort((a, b) => width(b) - width(a))[0]!;
      widest.setAttribute('data-test', 'target');
      return [d3.select(widest).datum().data.name, width(widest)] as const;
    });
    expect(before).toBeGreaterThan(0);
    expect(before).toBeLessThan(full * 0.9);
    await p.click('#explore-flame g.frame[data-test="target"]');
    // d3 moves the frames on the next animation frames
    await p.waitForFunction(
      (w: number) =>
        Number(
          document
            .querySelector('#explore-flame g.frame[data-test="target"] rect')!
            .getAttribute('width'),
        ) >=
        w - 1,
      { timeout: 10_000 },
      full,
    );
    expect(await p.$eval('#explore-flame', (e) => (e as HTMLElement).dataset.zoomed)).toBe(target);
    // Through d3's data: the zoomed frame and its callees, with their drawn widths.
    const drawn = await p.$$eval('#explore-flame g.frame', (gs) => {
      const d3 = (window as unknown as { d3: { select(e: Element): { datum(): FrameDatum } } }).d3;
      interface FrameDatum {
        data: { name: string };
        parent: FrameDatum | null;
        value: number;
      }
      return gs.map((g) => {
        const d = d3.select(g).datum();
        return {
          name: d.data.name,
          parent: d.parent?.data.name ?? '',
          zoomed: g.getAttribute('data-test') === 'target',
          width: Number(g.querySelector('rect')!.getAttribute('width')),
        };
      });
    });
    const zoomed = drawn.find((f) => f.zoomed)!;
    expect(Math.abs(zoomed.width - full)).toBeLessThanOrEqual(1);
    const callees = drawn.filter((f) => f.parent === target && f.width > 0);
    expect(callees.map((f) => f.name)).toContain('PyByteArray_Resize');
    expect(callees.reduce((n, f) => n + f.width, 0)).toBeGreaterThan(full * 0.9);
    // the callers and callees table follows the click
    expect(await p.$eval('#selected', (e) => e.textContent)).toContain(target);
    expect(await p.$eval('#callees tbody', (e) => e.textContent)).toContain(callees[0]!.name);
    // reset: the frame is drawn as wide as before the click again
    await p.click('#reset-zoom');
    await p.waitForFunction(
      (w: number) =>
        Math.abs(
          Number(
            document
              .querySelector('#explore-flame g.frame[data-test="target"] rect')!
              .getAttribute('width'),
          ) - w,
        ) <= 1,
      { timeout: 10_000 },
      before,
    );
  });

  it('highlights the frames a search matches and counts them', async () => {
    const p = o.page;
    const matches = await typeSearch(p, 'PyByteArray_Resize');
    expect(matches).toBeGreaterThanOrEqual(1);
    expect(await p.$eval('#search-result', (e) => e.textContent)).toMatch(/^\d+ frames? match/);
    const highlighted = await p.$$eval(
      '#explore-flame g.frame rect',
      (rs) => rs.filter((r) => r.getAttribute('fill') === '#E600E6').length,
    );
    expect(highlighted).toBeGreaterThanOrEqual(1);
    expect(highlighted).toBeLessThanOrEqual(matches);
    expect(await typeSearch(p, 'no_such_function_anywhere')).toBe(0);
    await p.$eval('#search', (e) => ((e as HTMLInputElement).value = ''));
    await p.type('#search', ' ');
  });

  it('a range brushed over phase 2 shows only the allocations made in it', async () => {
    const p = o.page;
    const end = json.durationNs;
    const whole = await flameTotal(p);
    expect(await flameNames(p)).toContain('PyByteArray_Resize');
    await brush(p, end * 0.6, end * 1.1);
    expect(await p.$eval('#range', (e) => (e as HTMLElement).dataset.range)).toMatch(/^\d+-\d+$/);
    expect(await flameNames(p)).not.toContain('PyByteArray_Resize');
    const inRange = await flameTotal(p);
    expect(inRange).toBeGreaterThanOrEqual(3 * 3_000_000);
    expect(inRange).toBeLessThan(whole);
    expect(await treeTopTotal(p, 'top-down')).toBe(inRange);
    expect(await treeTopTotal(p, 'bottom-up')).toBe(inRange);
    expect(await typeSearch(p, 'PyByteArray_Resize')).toBe(0);
    // every ranged mode is its column of the range's cells, site by site
    const run = pageData(html).runs[0]!;
    const tl = run.timeline!;
    const [b0, b1] = (await p.$eval('#range', (e) => (e as HTMLElement).dataset.range))!
      .split('-')
      .map(Number) as [number, number];
    const at = (i: number, column: TimelineColumn): number =>
      tl.cells[i + TIMELINE_COLUMNS.indexOf(column)]!;
    const inRangeOf = (column: TimelineColumn): number => {
      const bySite = new Map<number, number>();
      for (let i = 0; i < tl.cells.length; i += tl.fields) {
        const b = at(i, 'bucket');
        const site = at(i, 'site');
        if (b >= b0 && b <= b1) bySite.set(site, (bySite.get(site) ?? 0) + at(i, column));
      }
      return [...bySite.values()].reduce((n, v) => n + Math.max(v, 0), 0);
    };
    for (const [mode, column] of [
      ['bytes', 'bytes'],
      ['allocations', 'allocations'],
      ['temporary', 'temporary'],
      ['net', 'liveAtEnd'],
      ['peak', 'liveAtPeak'],
      ...(run.leakSource === 'never-freed' ? [['leaked', 'liveAtEnd'] as const] : []),
    ] as const) {
      await p.select('#mode', mode);
      expect(await flameTotal(p), mode).toBe(inRangeOf(column));
    }
    await p.select('#mode', 'bytes');
    // back to the whole run
    await p.click('#clear-range');
    expect(await flameTotal(p)).toBe(whole);
    expect(await typeSearch(p, 'PyByteArray_Resize')).toBeGreaterThanOrEqual(1);
  });

  it('opens on a readable first screen, wide and narrow, with human axis ticks', async () => {
    const p = o.page;
    await expectReadableFirstScreen(p, html, 1280, 800);
    for (const axis of ['x-axis', 'y-axis'])
      expectHumanTicks(
        await p.$$eval(`#explore-heap-svg .${axis} .tick text`, (ts) =>
          ts.map((t) => t.textContent ?? ''),
        ),
      );
    await expectReadableFirstScreen(p, html, 640, 700);
    await p.setViewport({ width: 1280, height: 1000 });
  });

  it('with its timeline counted for callers (a page of many sites), a range adds up the same', async () => {
    const data = pageData(html);
    const run = data.runs[0]!;
    expect(run.timeline!.rows).toBeNull();
    // as a program with many sites gets it: a budget of 40 cells folds sites into callers
    const folded = pageTimeline(run.timeline!, run.timeline!.leaked, 40, {
      siteNode: run.sites.node,
      nodeParent: run.nodeParent,
    });
    expect(folded.rows).not.toBeNull();
    const foldedHtml = html.replace(/\.html$/, '-folded.html');
    writeFileSync(
      foldedHtml,
      readFileSync(html, 'utf8').replace(
        /(<script type="application\/json" id="heaphook-data">).*?(<\/script>)/s,
        (_, open: string, close: string) =>
          open + pageDataScript({ ...data, runs: [{ ...run, timeline: folded }] }) + close,
      ),
    );
    const f = await open(foldedHtml);
    const p = f.page;
    expect(await flameTotal(p)).toBe(json.allocatedBytes); // the whole run: every site
    await brush(p, json.durationNs * 0.6, json.durationNs * 1.1);
    const [b0, b1] = (await p.$eval('#range', (e) => (e as HTMLElement).dataset.range))!
      .split('-')
      .map(Number) as [number, number];
    let expected = 0;
    for (let i = 0; i < folded.cells.length; i += folded.fields)
      if (folded.cells[i + 1]! >= b0 && folded.cells[i + 1]! <= b1)
        expected += folded.cells[i + 3]!;
    expect(await flameTotal(p)).toBe(expected);
    expect(expected).toBeGreaterThanOrEqual(3 * 3_000_000);
    expect(await treeTopTotal(p, 'top-down')).toBe(expected);
    expect(await p.$eval('#range', (e) => e.textContent)).toContain('top of the stacks');
    // no frame below the callers the cells count for
    const depth = (node: number): number => (node < 0 ? -1 : 1 + depth(run.nodeParent[node]!));
    const deepest = Math.max(...folded.rows!.map(depth)) + 1; // + the flame graph's "all"
    const drawn = await p.$$eval('#explore-flame g.frame', (gs) => {
      const d3 = (
        window as unknown as { d3: { select(e: Element): { datum(): { depth: number } } } }
      ).d3;
      return Math.max(...gs.map((g) => d3.select(g).datum().depth));
    });
    expect(drawn).toBeLessThanOrEqual(deepest);
    expect(f.errors).toEqual([]);
    expect(f.requests).toEqual([]);
    await p.close();
  });

  it('without script, shows the static charts and tables', async () => {
    const page = await browser.newPage();
    await page.setJavaScriptEnabled(false);
    await page.goto(`file://${html}`, { waitUntil: 'load' });
    for (const id of ['summary', 'calls', 'top-peak', 'top-count', 'top-bytes'])
      expect(await page.$(`table#${id} tbody tr`), id).not.toBeNull();
    expect(await page.$('table#leaks')).not.toBeNull();
    for (const id of ['heap-chart', 'flamegraph'])
      expect(await page.$(`svg#${id}`), id).not.toBeNull();
    expect(await page.$('#explore-flame svg')).toBeNull();
    await page.close();
  });
});

describe('report.html of a 10,000,000-event log', () => {
  const log = record('html-churn', workload, ['churn', '5000000']);
  const { html, json } = reportTo(log);

  it('stays small and recomputes a brushed range from its timeline', async () => {
    expect(json.events).toBeGreaterThanOrEqual(10_000_000);
    const size = statSync(html).size;
    expect(size).toBeLessThan(2 * 1024 * 1024);
    const o = await open(html);
    const p = o.page;
    await expectReadableFirstScreen(p, html, 1280, 800);
    expect(await flameTotal(p)).toBe(json.allocatedBytes);
    const data = pageData(html);
    const tl = data.runs[0]!.timeline!;
    await brush(p, json.durationNs * 0.25, json.durationNs * 0.5);
    const [b0, b1] = (await p.$eval('#range', (e) => (e as HTMLElement).dataset.range))!
      .split('-')
      .map(Number) as [number, number];
    let expected = 0;
    for (let i = 0; i < tl.cells.length; i += tl.fields)
      if (tl.cells[i + 1]! >= b0 && tl.cells[i + 1]! <= b1) expected += tl.cells[i + 3]!;
    const inRange = await flameTotal(p);
    expect(inRange).toBe(expected);
    expect(inRange).toBeGreaterThan(0);
    expect(inRange).toBeLessThan(json.allocatedBytes);
    expect(o.errors).toEqual([]);
    expect(o.requests).toEqual([]);
    await p.close();
  });
});

describe('report NEW --diff BASE -o: the differential page', () => {
  const keep = (bytes: number) =>
    record(`html-diff-${bytes}`, python3, ['-c', `keep = [bytearray(${bytes}) for _ in range(4)]`]);
  const base = keep(1_000_000);
  const now = keep(2_000_000);
  const out = `${now}.diff`;
  heaphook(['report', now, '--diff', base, '-o', out]);
  const html = join(out, 'report.html');

  it('colours the site that grew red, beside the diff tables, with the base run drawn', async () => {
    const text = readFileSync(html, 'utf8');
    expect(text).toMatch(/<table id="diff-grew"[^>]*>.*PyByteArray_Resize/s);
    const o = await open(html);
    const p = o.page;
    const [r, g, b] = await frameColour(p, 'PyByteArray_Resize');
    expect(r).toBeGreaterThan(g + 50);
    expect(r).toBeGreaterThan(b + 50);
    expect(await p.$eval('#flame-total', (e) => e.textContent)).toContain('+3.8 MiB');
    expect(await p.$eval('#flame-legend', (e) => e.textContent)).toMatch(/grew.*shrank.*unchanged/);
    // the base run's heap over the new one's: its line's top is the base's peak on the same scale
    const [base, now] = pageData(html).runs.reverse() as [PageRun, PageRun];
    const box = (selector: string) =>
      p.$eval(selector, (e) => {
        const r = e.getBoundingClientRect();
        return { top: r.top, bottom: r.bottom };
      });
    const baseLine = await box('#explore-heap-svg path.base-line');
    const heap = await box('#explore-heap-svg path.heap-area');
    const zero = heap.bottom; // the area is filled down to 0 bytes
    expect(zero - baseLine.top).toBeGreaterThan(0);
    expect((zero - baseLine.top) / (zero - heap.top)).toBeCloseTo(
      Math.max(...base.series.max) / Math.max(...now.series.max),
      1,
    );
    expect(await p.$eval('#base-legend', (e) => e.textContent)).toContain('base');
    await expectReadableFirstScreen(p, html, 1280, 800);
    expect(o.errors).toEqual([]);
    expect(o.requests).toEqual([]);
    await p.close();
  });

  it('colours a site that shrank blue and one that grew red on the same page', async () => {
    // against the 2,000,000-byte bytearrays: 1,000,000-byte ones, and new bytes objects
    const mixed = record('html-diff-mixed', python3, [
      '-c',
      'keep = [bytearray(1000000) for _ in range(4)]\nmore = [b"x" * 3000000 for _ in range(3)]',
    ]);
    const out2 = `${mixed}.diff`;
    heaphook(['report', mixed, '--diff', now, '-o', out2]);
    const o = await open(join(out2, 'report.html'));
    const p = o.page;
    const [r, g, b] = await frameColour(p, 'PyByteArray_Resize');
    expect(b).toBeGreaterThan(r + 50);
    expect(b).toBeGreaterThan(g + 50);
    const grew = await p.$$eval(
      '#explore-flame g.frame rect',
      (rs) =>
        rs.filter((e) => /^rgb\(255,\s*\d+,\s*\d+\)$/.test(e.getAttribute('fill') ?? '')).length,
    );
    expect(grew).toBeGreaterThanOrEqual(1);
    expect(o.errors).toEqual([]);
    await p.close();
  });
});

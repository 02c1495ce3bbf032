/**
 * `heaphook report` on real traces: the exact-count workload's JSON summary matches the
 * numbers the workload prints; the heap chart marks the peak where it is (SVG geometry and
 * the PNG's pixels), the PNG and PDF open, the pprof profile decodes back to the same totals,
 * the HTML page loads in headless Chromium with its chart and tables; a truncated log gives an
 * error naming the offset, a non-zero status, and the report of the part before it.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, statSync, truncateSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { gunzipSync, inflateSync } from 'node:zlib';

import { Ajv } from 'ajv';
import { Profile } from 'pprof-format';
import { beforeAll, describe, expect, it } from 'vitest';

import { decodeLog, EXIT_DAMAGED_LOG, type ReportJson } from '../../src/index.js';
import {
  heaphookBin,
  logsIn,
  packageDir,
  scratch,
  traced,
  workload,
  type Expected,
} from '../helpers.js';
import { unmet } from '@heaphook/core/testing';

function heaphook(args: string[]) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    cwd: packageDir,
    encoding: 'utf8',
    timeout: 120_000,
    maxBuffer: 64 * 1024 * 1024,
  });
}

/** A minimal PNG reader (8-bit RGB/RGBA, no interlace): width, height and a pixel getter. */
function readPng(png: Buffer): {
  width: number;
  height: number;
  pixel(x: number, y: number): number[];
} {
  expect(png.subarray(0, 8)).toEqual(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
  expect(png.toString('latin1', 12, 16)).toBe('IHDR');
  const width = png.readUInt32BE(16);
  const height = png.readUInt32BE(20);
  const depth = png[24]!;
  const colorType = png[25]!;
  expect(depth).toBe(8);
  expect([2, 6]).toContain(colorType);
  expect(png[28]).toBe(0); // not interlaced
  const bpp = colorType === 6 ? 4 : 3;
  const idat: Buffer[] = [];
  for (let pos = 8; pos < png.length;) {
    const length = png.readUInt32BE(pos);
    const type = png.toString('latin1', pos + 4, pos + 8);
    if (type === 'IDAT') idat.push(png.subarray(pos + 8, pos + 8 + length));
    pos += 12 + length;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * bpp;
  const out = Buffer.alloc(stride * height);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)]!;
    for (let i = 0; i < stride; i++) {
      const x = raw[y * (stride + 1) + 1 + i]!;
      const a = i >= bpp ? out[y * stride + i - bpp]! : 0;
      const b = y > 0 ? out[(y - 1) * stride + i]! : 0;
      const c = i >= bpp && y > 0 ? out[(y - 1) * stride + i - bpp]! : 0;
      let v: number;
      if (filter === 0) v = x;
      else if (filter === 1) v = x + a;
      else if (filter === 2) v = x + b;
      else if (filter === 3) v = x + ((a + b) >> 1);
      else {
        const p = a + b - c;
        const pa = Math.abs(p - a);
        const pb = Math.abs(p - b);
        const pc = Math.abs(p - c);
        v = x + (pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
      }
      out[y * stride + i] = v & 0xff;
    }
  }
  return {
    width,
    height,
    pixel: (x, y) => [...out.subarray(y * stride + x * bpp, y * stride + x * bpp + 3)],
  };
}

function attr(svg: string, id: string, name: string): number {
  const element = new RegExp(`<[a-z]+ [^>]*id="${id}"[^>]*>`).exec(svg)?.[0];
  expect(element, `#${id} in the SVG`).toBeDefined();
  const value = new RegExp(` ${name}="([^"]*)"`).exec(element!)?.[1];
  expect(value, `${name} of #${id}`).toBeDefined();
  return Number(value);
}

describe('heaphook report on the exact-count workload', () => {
  let dir: string;
  let log: string;
  let expected: Expected;
  let json: ReportJson;
  let out: string;
  let peakEventTime: number;

  beforeAll(async () => {
    dir = scratch('report');
    // Without the exit leak check: leaked = never freed (the check's verdict is tested below).
    const run = traced(dir, workload, ['counts'], {
      HEAPHOOK_TIMING: '1',
      HEAPHOOK_LEAK_CHECK: '0',
    });
    expect(run.status, run.stderr).toBe(0);
    expected = JSON.parse(run.stdout) as Expected;
    log = logsIn(dir)[0]!;
    for await (const r of decodeLog(log)) {
      if (r.type === 'event' && r.op === 'malloc' && r.size === 10_000_000) peakEventTime = r.time;
    }
    out = join(dir, 'out');
    const cli = heaphook(['report', '-o', out, '--json', log]);
    expect(cli.status, cli.stderr).toBe(0);
    json = JSON.parse(cli.stdout) as ReportJson;
  });

  it('--json matches the numbers the workload prints, exactly', () => {
    expect(json.allocations).toBe(expected.malloc + expected.calloc + expected.aligned);
    expect(json.reallocs).toBe(expected.realloc);
    expect(json.frees).toBe(expected.free);
    expect(json.calls).toEqual({
      malloc: expected.malloc,
      calloc: expected.calloc,
      realloc: expected.realloc,
      free: expected.free,
      posix_memalign: 10,
      memalign: 10,
      aligned_alloc: 10,
      valloc: 5,
      pvalloc: 5,
    });
    expect(json.peakHeapBytes).toBe(expected.peakBytes);
    expect(json.peakTimeNs).toBe(peakEventTime);
    expect(json.leakSource).toBe('never-freed');
    expect(json.leakedBlocks).toBe(expected.leakedBlocks);
    expect(json.leakedBytes).toBe(expected.leakedBytes);
    expect(json.reachableAtExitBlocks).toBe(0);
    expect(json.reachableAtExitBytes).toBe(0);
    expect(json.dropped).toBe(0);
    expect(json.unknownFrees).toBe(0);
    expect(json.end).toBe('exit');
    expect(json.error).toBeNull();
    // the 10 MB block, freed right after it was allocated: the top site at the peak, temporary
    expect(json.topSites[0]!.stack[0]).toMatch(/^peak_site /);
    expect(json.topSites[0]!.peakBytes).toBe(10_000_000);
    expect(json.topSites[0]!.temporary).toBe(1);
    expect(json.topSitesByCount[0]!.stack[0]).toMatch(/^site_malloc /);
    expect(json.topSitesByCount[0]!.allocations).toBe(1000);
    expect(json.topSitesByBytes[0]!.stack[0]).toMatch(/^peak_site /);
    expect(json.leakSites).toHaveLength(1);
    expect(json.leakSites[0]!.stack[0]).toMatch(/^leak_site \(.*workload\.c:\d+\)/);
    expect(json.sizeHistogram.reduce((n, r) => n + r.count, 0)).toBe(
      json.allocations + json.reallocs,
    );
    // durations were recorded: percentiles for every function called
    expect(json.latency.malloc?.count).toBe(expected.malloc);
    expect(json.latency.free?.count).toBe(expected.free);
    const p = json.latency.malloc!;
    expect(p.p50).toBeLessThanOrEqual(p.p90);
    expect(p.p90).toBeLessThanOrEqual(p.p99);
    expect(p.p99).toBeLessThanOrEqual(p.p999);
    expect(p.p999).toBeLessThanOrEqual(p.max);
    // summary.json is the same document
    expect(JSON.parse(readFileSync(join(out, 'summary.json'), 'utf8'))).toEqual(json);
  });

  it('the text summary names the peak, the leaks and the top sites', () => {
    const text = heaphook(['report', log]);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout).toContain('peak heap: 9.62 MiB (10,089,200 bytes)');
    expect(text.stdout).toContain('leaked (never-freed): 7 blocks, 27.3 KiB (28,000 bytes)');
    expect(text.stdout).toMatch(
      /top sites by peak contribution:\n {2}#1 peak_site: peak 9\.54 MiB.*\n {6}peak_site/,
    );
  });

  it('the heap chart marks the peak at its time and size, in the SVG and in the PNG', () => {
    const svg = readFileSync(join(out, 'heap.svg'), 'utf8');
    const cx = attr(svg, 'peak-marker', 'cx');
    const cy = attr(svg, 'peak-marker', 'cy');
    const x0 = attr(svg, 'plot-area', 'x');
    const y0 = attr(svg, 'plot-area', 'y');
    const w = attr(svg, 'plot-area', 'width');
    const h = attr(svg, 'plot-area', 'height');
    const tMax = attr(svg, 'plot-area', 'data-t-max');
    const yMax = attr(svg, 'plot-area', 'data-y-max');
    // back from pixels to data: within the 0.01 px the coordinates are rounded to
    expect(Math.abs(((cx - x0) / w) * tMax - json.peakTimeNs)).toBeLessThanOrEqual(
      (tMax / w) * 0.01,
    );
    expect(Math.abs(((y0 + h - cy) / h) * yMax - json.peakHeapBytes)).toBeLessThanOrEqual(
      (yMax / h) * 0.01,
    );
    // the drawn line reaches its highest point at the marker
    const points = /id="heap-line" points="([^"]+)"/
      .exec(svg)![1]!
      .split(' ')
      .map((p) => p.split(',').map(Number) as [number, number]);
    const top = Math.min(...points.map((p) => p[1]));
    expect(top).toBeCloseTo(cy, 2);
    const atTop = points.filter((p) => p[1] === top).map((p) => p[0]);
    expect(Math.min(...atTop)).toBeLessThanOrEqual(cx + 0.01);
    expect(Math.max(...atTop)).toBeGreaterThanOrEqual(cx - 0.01);

    // PNG (rendered at 2x): the right size, and the red marker where the SVG puts it
    const png = readPng(readFileSync(join(out, 'heap.png')));
    expect(png.width).toBe(2 * attr(svg, 'heap-chart', 'width'));
    expect(png.height).toBe(2 * attr(svg, 'heap-chart', 'height'));
    const [r, g, b] = png.pixel(Math.round(2 * cx), Math.round(2 * cy));
    expect(r).toBeGreaterThan(150);
    expect(g).toBeLessThan(100);
    expect(b).toBeLessThan(100);
    const [br, bg, bb] = png.pixel(5, 5); // white background
    expect([br, bg, bb]).toEqual([255, 255, 255]);
  });

  it('the PDF opens: header, cross-reference table, the font embedded, the text extractable', (ctx) => {
    const why = unmet('pdftotext');
    if (why !== undefined) ctx.skip(why);
    const pdf = readFileSync(join(out, 'heap.pdf'));
    expect(pdf.toString('latin1', 0, 5)).toBe('%PDF-');
    const text = pdf.toString('latin1');
    expect(text).toMatch(/\nxref\n0 \d+\n/);
    expect(text).toMatch(/startxref\n\d+\n%%EOF\n?$/);
    expect(text).toContain('/FontFile2'); // DejaVu Sans, embedded
    const extracted = spawnSync('pdftotext', [join(out, 'heap.pdf'), '-'], { encoding: 'utf8' });
    expect(
      extracted.error,
      'pdftotext (tools/install-system-packages.sh: poppler-utils)',
    ).toBeUndefined();
    expect(extracted.stdout).toContain('peak 9.62 MiB');
    expect(extracted.stdout).toContain('Heap consumption over time');
  });

  it('the pprof profile decodes back with the same totals, functions and mappings', () => {
    const profile = Profile.decode(gunzipSync(readFileSync(join(out, 'profile.pb.gz'))));
    const strings = profile.stringTable.strings;
    expect(
      profile.sampleType.map((t) => `${strings[Number(t.type)]}/${strings[Number(t.unit)]}`),
    ).toEqual([
      'alloc_objects/count',
      'alloc_space/bytes',
      'inuse_objects/count',
      'inuse_space/bytes',
      'peak_space/bytes',
    ]);
    const total = [0, 0, 0, 0, 0];
    for (const s of profile.sample) s.value.forEach((v, i) => (total[i]! += Number(v)));
    expect(total).toEqual([
      json.allocations + json.reallocs,
      json.allocatedBytes,
      7,
      28_000,
      json.peakHeapBytes, // the sites' contributions add up to the peak
    ]);
    const names = new Set(profile.function.map((f) => strings[Number(f.name)]));
    for (const fn of ['peak_site', 'site_malloc', 'leak_site', 'main']) expect(names).toContain(fn);
    const program = profile.mapping.find((m) => strings[Number(m.filename)] === workload);
    expect(strings[Number(program!.buildId)]).toMatch(/^[0-9a-f]{40}$/);
    // every location of a sample exists and points into a mapping
    const locations = new Map(profile.location.map((l) => [Number(l.id), l]));
    for (const s of profile.sample) {
      for (const id of s.locationId) {
        const l = locations.get(Number(id));
        expect(l).toBeDefined();
        expect(Number(l!.mappingId)).toBeGreaterThan(0);
        expect(l!.line.length).toBeGreaterThan(0);
      }
    }
  });

  it('go tool pprof opens the profile: the leaked bytes in use, the allocations by site', (ctx) => {
    const why = unmet('go');
    if (why !== undefined) ctx.skip(why);
    const pprof = (sampleIndex: string) => {
      const run = spawnSync(
        'go',
        [
          'tool',
          'pprof',
          '-top',
          '-unit=B',
          '-symbolize=none',
          `-sample_index=${sampleIndex}`,
          join(out, 'profile.pb.gz'),
        ],
        { encoding: 'utf8', timeout: 120_000 },
      );
      expect(run.error, 'go (tools/install-system-packages.sh: golang-go)').toBeUndefined();
      expect(run.status, run.stderr).toBe(0);
      return run.stdout;
    };
    const inUse = pprof('inuse_space');
    expect(inUse).toContain('Type: inuse_space');
    expect(inUse).toContain(`Total samples = ${json.leakedBytes}B`);
    expect(inUse).toMatch(/^ +28000B +100% +100% +28000B +100% +leak_site$/m);
    const allocated = pprof('alloc_space');
    expect(allocated).toContain(`Total samples = ${json.allocatedBytes}B`);
    expect(allocated).toMatch(/^ +10000000B +[\d.]+% +[\d.]+% +10000000B +[\d.]+% +peak_site$/m);
    const atPeak = pprof('peak_space');
    expect(atPeak).toContain('Type: peak_space');
    expect(atPeak).toContain(`Total samples = ${json.peakHeapBytes}B`);
    expect(atPeak).toMatch(/^ +10000000B +[\d.]+% +[\d.]+% +10000000B +[\d.]+% +peak_site$/m);
  });

  it("speedscope.json passes speedscope's own file-format schema, its profiles adding up", () => {
    // The schema ships in the speedscope package (dist/release/file-format-schema.json).
    const schemaPath = join(
      dirname(createRequire(import.meta.url).resolve('speedscope/package.json')),
      'dist/release/file-format-schema.json',
    );
    const schema = JSON.parse(readFileSync(schemaPath, 'utf8')) as object;
    const validate = new Ajv({ allErrors: true, strict: false }).compile({
      ...schema,
      $ref: '#/definitions/FileFormat.File',
    });
    const file = JSON.parse(readFileSync(join(out, 'speedscope.json'), 'utf8')) as {
      shared: { frames: { name: string }[] };
      profiles: {
        name: string;
        unit: string;
        samples: number[][];
        weights: number[];
        endValue: number;
      }[];
    };
    expect(validate(file), JSON.stringify(validate.errors)).toBe(true);
    // and the schema bites: a profile without its samples is refused
    expect(validate({ ...file, profiles: [{ ...file.profiles[0], samples: undefined }] })).toBe(
      false,
    );
    const byName = new Map(file.profiles.map((p) => [p.name.split(' ')[0], p]));
    const sum = (p: { weights: number[] } | undefined) => p!.weights.reduce((a, b) => a + b, 0);
    expect(sum(byName.get('allocated'))).toBe(json.allocatedBytes);
    expect(sum(byName.get('peak'))).toBe(json.peakHeapBytes);
    expect(sum(byName.get('in'))).toBe(28_000);
    expect(byName.get('allocations')!.unit).toBe('none');
    for (const p of file.profiles) expect(p.endValue).toBe(sum(p));
    // stacks run outermost first: main before the allocation sites
    const frameNames = (stack: number[]) => stack.map((i) => file.shared.frames[i]!.name);
    const leak = byName.get('in')!.samples.map(frameNames);
    expect(leak).toHaveLength(1);
    expect(leak[0]!.indexOf('main')).toBeLessThan(leak[0]!.indexOf('leak_site'));
    expect(leak[0]!.at(-1)).toBe('leak_site');
  });

  it('the flame graph has the allocation sites on top of main', () => {
    const svg = readFileSync(join(out, 'flamegraph.svg'), 'utf8');
    expect(svg).toMatch(/<title>main: 9\.70 MiB \(100\.00 %\)<\/title>/);
    expect(svg).toMatch(/<title>peak_site: 9\.54 MiB/);
  });

  it('the HTML page loads in headless Chromium with its chart and tables', (ctx) => {
    const why = unmet('chromium');
    if (why !== undefined) ctx.skip(why);
    const html = join(out, 'report.html');
    const text = readFileSync(html, 'utf8');
    // Nothing to fetch: no external script, stylesheet or image; the only URLs are XML
    // namespaces and the licence line of the inlined d3 (test/integration/html.test.ts watches the network).
    expect(text).not.toMatch(/<link|<script[^>]* src=|<img/);
    const urls = text.match(/https?:\/\/[^\s"'`)]+/g) ?? [];
    expect(
      urls.filter((u) => !u.startsWith('http://www.w3.org/') && u !== 'https://d3js.org'),
    ).toEqual([]);
    const chromium = spawnSync(
      'chromium',
      ['--headless', '--no-sandbox', '--disable-gpu', '--dump-dom', `file://${html}`],
      { encoding: 'utf8', timeout: 60_000, maxBuffer: 64 * 1024 * 1024 },
    );
    expect(chromium.error, 'chromium (tools/install-system-packages.sh)').toBeUndefined();
    const dom = chromium.stdout;
    expect(dom).toMatch(/<svg [^>]*id="heap-chart"/);
    expect(dom).toMatch(/<circle id="peak-marker"/);
    expect(dom).toMatch(/<svg [^>]*id="flamegraph"/);
    for (const table of [
      'summary',
      'calls',
      'top-peak',
      'top-count',
      'top-bytes',
      'leaks',
      'size-histogram',
      'latency',
    ]) {
      expect(dom, `table#${table}`).toMatch(new RegExp(`<table id="${table}"[^>]*>.*?<tr>`, 's'));
    }
    expect(dom).toContain('peak_site');
    expect(dom).toContain('10,089,200 bytes');
  });
});

describe('heaphook report with a leak check in the log', () => {
  it("counts as leaked the blocks of the check's LEAK records, the rest as reachable at exit", () => {
    const dir = scratch('report-leaks');
    const run = traced(dir, workload, ['counts']); // HEAPHOOK_LEAK_CHECK is on by default
    expect(run.status, run.stderr).toBe(0);
    const expected = JSON.parse(run.stdout) as Expected;
    const cli = heaphook(['report', '--json', logsIn(dir)[0]!]);
    expect(cli.status, cli.stderr).toBe(0);
    const json = JSON.parse(cli.stdout) as ReportJson;
    expect(json.leakSource).toBe('leak-check');
    // the 7 blocks live at exit are either unreachable (leaked) or reachable, none lost
    expect(json.neverFreedBlocks).toBe(expected.leakedBlocks);
    expect(json.neverFreedBytes).toBe(expected.leakedBytes);
    expect(json.leakedBlocks + json.reachableAtExitBlocks).toBe(expected.leakedBlocks);
    expect(json.leakedBytes + json.reachableAtExitBytes).toBe(expected.leakedBytes);
    // leaked blocks carry the stack of their allocation
    expect(json.leakSites.reduce((n, s) => n + s.blocks, 0)).toBe(json.leakedBlocks);
    for (const site of json.leakSites) expect(site.stack[0]).toMatch(/^leak_site /);
  });
});

describe('heaphook report on a damaged log', () => {
  it('names the offset, exits non-zero and still reports the valid part', () => {
    const dir = scratch('report-cut');
    const run = traced(dir, workload, ['churn', '200000'], {
      HEAPHOOK_STACKS: '0',
      HEAPHOOK_COMPRESS: 'none',
    });
    expect(run.status, run.stderr).toBe(0);
    const log = logsIn(dir)[0]!;
    const cut = `${log}.cut`;
    copyFileSync(log, cut);
    const size = statSync(log).size;
    truncateSync(cut, Math.floor(size * 0.6));
    const out = join(dir, 'out');
    const cli = heaphook(['report', '-o', out, '--json', cut]);
    expect(cli.status).toBe(EXIT_DAMAGED_LOG);
    const offset = Number(/at byte offset (\d+)/.exec(cli.stderr)?.[1]);
    expect(cli.stderr).toMatch(
      /^heaphook: .*truncated.*; the report covers the part before byte \d+\n$/,
    );
    expect(offset).toBeGreaterThan(size * 0.3);
    expect(offset).toBeLessThan(size * 0.6);
    const json = JSON.parse(cli.stdout) as ReportJson;
    expect(json.error?.offset).toBe(offset);
    expect(json.end).toBeNull();
    expect(json.allocations).toBeGreaterThan(200_000 * 0.3);
    expect(json.allocations).toBeLessThan(200_000);
    for (const f of [
      'report.html',
      'heap.svg',
      'heap.png',
      'heap.pdf',
      'flamegraph.svg',
      'profile.pb.gz',
      'summary.json',
    ]) {
      expect(existsSync(join(out, f)), f).toBe(true);
    }
    expect(readFileSync(join(out, 'report.html'), 'utf8')).toContain(`before byte ${offset}`);
  });
});

#!/usr/bin/env node
/**
 * How long report.html pages take to open in headless Chromium: for each page, its size and
 * the median over RUNS openings (interleaved across the pages) of the time from navigation
 * start to the interactive views drawn (window.heaphookPage.ready), as the page's own
 * performance.now() reads it.
 *
 *   node scripts/html-open-time.mjs [--runs 5] PAGE.html [PAGE.html ...]
 */
import { statSync } from 'node:fs';
import { resolve } from 'node:path';

import puppeteer from 'puppeteer-core';

const args = process.argv.slice(2);
let runs = 5;
const pages = [];
for (let i = 0; i < args.length; i++) {
  if (args[i] === '--runs') runs = Number(args[++i]);
  else pages.push(resolve(args[i]));
}
if (pages.length === 0 || !(runs > 0)) {
  console.error('usage: node scripts/html-open-time.mjs [--runs N] PAGE.html [PAGE.html ...]');
  process.exit(2);
}
const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu'],
});
const times = new Map(pages.map((p) => [p, []]));
for (let r = 0; r < runs; r++) {
  for (const html of pages) {
    const page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1000 });
    await page.goto(`file://${html}`, { waitUntil: 'load', timeout: 120_000 });
    await page.waitForFunction('window.heaphookPage && window.heaphookPage.ready === true', {
      timeout: 120_000,
    });
    times.get(html).push(await page.evaluate('window.heaphookPage.readyMs ?? performance.now()'));
    await page.close();
  }
}
await browser.close();
for (const html of pages) {
  const t = times.get(html).sort((a, b) => a - b);
  const median = t[Math.floor(t.length / 2)];
  const mib = (statSync(html).size / 1024 / 1024).toFixed(2);
  console.log(
    `${html}: ${mib} MiB, opens in ${Math.round(median)} ms (median of ${t.length}: ${t.map(Math.round).join(' ')})`,
  );
}

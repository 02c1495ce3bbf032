#!/usr/bin/env node
// `npm test`: every package's vitest suite through nx, then one closing line that CI reads:
//   N passed, N failed[, N skipped]
// Each package's vitest writes a JSON report (test-results.json in the package); this script
// removes stale ones first, runs nx, and adds the reports up. A package whose suite did not
// produce a report (it crashed, or its build failed) counts as one failure, named. Every failed
// test is listed again just above the closing line, with the first lines of its failure, because
// CI keeps only the tail of the log and nx interleaves the packages' output.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../..', import.meta.url));
// Every workspace folder with a test script: packages/* and tools (the generator and pack tests).
const packages = [
  ...readdirSync(join(root, 'packages')).map((name) => join('packages', name)),
  'tools',
].filter((dir) => {
  const manifest = join(root, dir, 'package.json');
  if (!existsSync(manifest)) return false;
  return typeof JSON.parse(readFileSync(manifest, 'utf8')).scripts?.test === 'string';
});
const reportOf = (dir) => join(root, dir, 'test-results.json');
for (const name of packages) rmSync(reportOf(name), { force: true });

const extra = process.argv.slice(2);
const nx = spawnSync(
  'npx',
  [
    'nx',
    'run-many',
    '-t',
    'test',
    '--outputStyle=stream',
    ...extra,
    '--',
    '--reporter=default',
    '--reporter=json',
    '--outputFile.json=test-results.json',
  ],
  { cwd: root, stdio: 'inherit' },
);

let passed = 0;
let failed = 0;
let skipped = 0;
const missing = [];
const failures = [];
const FAILURE_LINES_SHOWN = 12;
// The message and the test's own frames; vitest's frames (under node_modules) say nothing.
const firstLines = (text) =>
  text
    .split('\n')
    .filter((line) => !/^\s*at .*node_modules/.test(line) && !/^\s*at new Promise/.test(line))
    .slice(0, FAILURE_LINES_SHOWN)
    .join('\n    ');
for (const name of packages) {
  if (!existsSync(reportOf(name))) {
    missing.push(name);
    continue;
  }
  const report = JSON.parse(readFileSync(reportOf(name), 'utf8'));
  passed += report.numPassedTests ?? 0;
  failed += report.numFailedTests ?? 0;
  skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0);
  for (const suite of report.testResults ?? []) {
    const file = suite.name?.startsWith(root) ? suite.name.slice(root.length) : suite.name;
    const assertions = suite.assertionResults ?? [];
    // A suite that failed to load (syntax error, missing build) has no tests but failed.
    if (suite.status === 'failed' && assertions.length === 0) {
      failed += 1;
      failures.push(`${file}: the file failed to run\n    ${firstLines(suite.message ?? '')}`);
    }
    for (const test of assertions) {
      if (test.status !== 'failed') continue;
      const message = (test.failureMessages ?? []).join('\n');
      failures.push(`${file} > ${test.fullName}\n    ${firstLines(message)}`);
    }
  }
}
const selective = extra.some((arg) => arg.startsWith('--projects') || arg === '-p');
if (!selective && missing.length > 0) {
  process.stdout.write(
    `no test report from: ${missing.join(', ')} (its build or test run failed)\n`,
  );
  failed += missing.length;
}
if (failures.length > 0) {
  process.stdout.write(`\nfailed:\n${failures.map((entry) => `  ${entry}\n`).join('')}`);
}
process.stdout.write(
  `\n${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`,
);
process.exit(nx.status !== 0 || failed > 0 ? 1 : 0);

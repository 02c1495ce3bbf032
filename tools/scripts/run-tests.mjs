#!/usr/bin/env node
// `npm test`: builds every package through nx (native libraries, addons, the arm64 tier's
// cross builds), then runs every package's vitest suite in ONE vitest run at the root (its
// projects), so all test files share one pool of workers, longest first
// (tools/test-support/sequencer.ts), and ends with one closing line that CI reads:
//   N passed, N failed[, N skipped]
// A package whose suite did not run (a build failed, a file failed to load) counts as a
// failure, named. Every failed test is listed again just above the closing line, with the
// first lines of its failure, because CI keeps only the tail of the log.
//
//   npm test                                  every package
//   npm test -- --projects=heaptrack,tlsf     some packages (nx's spelling; vitest's --project)
//   npm test -- --record-durations            also write tools/test-durations.json
//
// HEAPHOOK_TEST_WORKERS sets the pool's size (default 3 on 2 cores: tests mostly wait on the
// programs they run).
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
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
const projectOf = (dir) =>
  JSON.parse(readFileSync(join(root, dir, 'package.json'), 'utf8')).nx?.name ??
  dir.split('/').pop();

const args = process.argv.slice(2);
const recordDurations = args.includes('--record-durations');
const selected = args
  .filter((arg) => arg.startsWith('--projects='))
  .flatMap((arg) => arg.slice('--projects='.length).split(','))
  .filter((name) => name !== '');
const unknownArgs = args.filter(
  (arg) => arg !== '--record-durations' && !arg.startsWith('--projects='),
);
if (unknownArgs.length > 0) {
  process.stderr.write(
    `run-tests: unknown argument(s) ${unknownArgs.join(' ')} (known: --projects=a,b --record-durations)\n`,
  );
  process.exit(2);
}

const report = join(root, 'test-results.json');
rmSync(report, { force: true });

const nxSelection = selected.length > 0 ? [`--projects=${selected.join(',')}`] : [];
const build = spawnSync(
  'npx',
  ['nx', 'run-many', '-t', 'build', 'build-arm64', '--outputStyle=stream', ...nxSelection],
  { cwd: root, stdio: 'inherit' },
);
if (build.status !== 0) {
  process.stdout.write('\nthe build failed (above); no test was run\n\n0 passed, 1 failed\n');
  process.exit(1);
}

const workers =
  process.env.HEAPHOOK_TEST_WORKERS ?? String(Math.max(2, availableParallelism() + 1));
const vitest = spawnSync(
  'npx',
  [
    'vitest',
    'run',
    `--maxWorkers=${workers}`,
    ...selected.flatMap((name) => ['--project', name]),
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
const durations = {};
const ran = new Set();
if (!existsSync(report)) {
  missing.push('every package (vitest wrote no report: it crashed or could not start)');
} else {
  const results = JSON.parse(readFileSync(report, 'utf8'));
  passed += results.numPassedTests ?? 0;
  failed += results.numFailedTests ?? 0;
  skipped += (results.numPendingTests ?? 0) + (results.numTodoTests ?? 0);
  for (const suite of results.testResults ?? []) {
    const file = suite.name?.startsWith(root) ? suite.name.slice(root.length) : suite.name;
    ran.add(packages.find((dir) => file.startsWith(`${dir}/`)));
    if (suite.endTime > suite.startTime)
      durations[file] = Math.round((suite.endTime - suite.startTime) / 100) / 10;
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
  // A package none of whose files ran: its suite was not found or not loaded at all.
  for (const dir of packages) {
    if (selected.length > 0 && !selected.includes(projectOf(dir))) continue;
    if (!ran.has(dir)) missing.push(dir);
  }
}
if (missing.length > 0) {
  process.stdout.write(`no test results from: ${missing.join(', ')}\n`);
  failed += missing.length;
}
if (recordDurations) {
  const sorted = Object.fromEntries(Object.entries(durations).sort(([, a], [, b]) => b - a));
  writeFileSync(join(root, 'tools', 'test-durations.json'), `${JSON.stringify(sorted, null, 2)}\n`);
  process.stdout.write(`wrote tools/test-durations.json (${Object.keys(sorted).length} files)\n`);
}
if (failures.length > 0) {
  process.stdout.write(`\nfailed:\n${failures.map((entry) => `  ${entry}\n`).join('')}`);
}
process.stdout.write(
  `\n${passed} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ''}\n`,
);
process.exit(vitest.status !== 0 || failed > 0 ? 1 : 0);

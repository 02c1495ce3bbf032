/**
 * `heaphook check`, the CI gate, on the exact-count workload: its known peak, leaks and
 * allocation count pass the limits set at those figures and fail the limits one below, each
 * failure named with by how much and the stacks behind it; limits from a file; JUnit XML and
 * GitHub annotations; bad limits are usage errors.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import {
  heaphookBin,
  logsIn,
  packageDir,
  scratch,
  traced,
  workload,
  type Expected,
} from '../helpers.js';

function heaphook(args: readonly string[]) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    cwd: packageDir,
    timeout: 120_000,
  });
}

const dir = scratch('check');
const run = traced(dir, workload, ['counts']);
const expected = JSON.parse(run.stdout) as Expected;
const log = logsIn(dir)[0]!;
/** The report's figures: the leak check's verdict (leaked: unreachable at exit) is the report's;
 * the workload itself says its peak and what it never freed (growth). */
const report = JSON.parse(heaphook(['report', log, '--json']).stdout) as {
  allocations: number;
  leakedBytes: number;
  leakedBlocks: number;
  neverFreedBytes: number;
};

describe('heaphook check', () => {
  it('passes limits at the known figures: exit 0, one ok line each', () => {
    const r = heaphook([
      'check',
      log,
      '--max-peak',
      String(expected.peakBytes),
      '--max-leaked',
      String(report.leakedBytes),
      '--max-leaked-blocks',
      String(report.leakedBlocks),
      '--max-growth',
      String(expected.leakedBytes),
      '--max-allocations',
      String(report.allocations),
    ]);
    expect(report.neverFreedBytes).toBe(expected.leakedBytes);
    expect(report.leakedBlocks).toBeGreaterThan(0);
    expect(r.status, r.stdout + r.stderr).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^ok   max-peak: .*\\(${expected.peakBytes} B\\) <= `, 'm'),
    );
    expect(r.stdout).toMatch(/^ok   max-leaked: /m);
    expect(r.stdout).toMatch(
      new RegExp(`^ok   max-leaked-blocks: ${report.leakedBlocks} <= ${report.leakedBlocks}$`, 'm'),
    );
    expect(r.stdout).toMatch(/^ok   max-growth: .*\(28000 B\) <= /m);
    expect(r.stdout).toMatch(/^all 5 limits met$/m);
  });

  it('fails one below each: names the limit, by how much, and the stacks behind it', () => {
    const r = heaphook([
      'check',
      log,
      '--max-peak',
      String(expected.peakBytes - 1),
      '--max-leaked-blocks',
      String(report.leakedBlocks - 1),
      '--max-growth',
      String(expected.leakedBytes - 1),
    ]);
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^FAIL max-peak: .* > .*, over by 1 B/m);
    const n = report.leakedBlocks;
    expect(r.stdout).toMatch(
      new RegExp(`^FAIL max-leaked-blocks: ${n} > ${n - 1}, over by 1\\b`, 'm'),
    );
    expect(r.stdout).toMatch(/^FAIL max-growth: .*\(28000 B\) > .*\(27999 B\), over by 1 B/m);
    // The leaks all come from leak_site: its frame is under the leaked-blocks failure.
    const leakPart = r.stdout.slice(r.stdout.indexOf('FAIL max-leaked-blocks'));
    expect(leakPart).toMatch(new RegExp(`${n} from:\\n\\s+leak_site \\(.*workload\\.c:\\d+\\)`));
    expect(r.stdout).toMatch(/^3 of 3 limits exceeded: max-peak, max-leaked-blocks, max-growth$/m);
  });

  it('takes limits from a file, the options overriding it', () => {
    const file = join(dir, 'limits.json');
    writeFileSync(file, JSON.stringify({ 'max-peak': '64MiB', 'max-leaked': 0 }));
    const fromFile = heaphook(['check', log, '--limits', file]);
    expect(fromFile.status).toBe(1);
    expect(fromFile.stdout).toMatch(/^ok   max-peak: .* <= 64\.0 MiB/m);
    expect(fromFile.stdout).toMatch(
      new RegExp(`^FAIL max-leaked: .*\\b${report.leakedBytes} B\\)? > 0 B, over by`, 'm'),
    );
    const overridden = heaphook(['check', log, '--limits', file, '--max-leaked', '1MiB']);
    expect(overridden.status).toBe(0);
  });

  it('writes JUnit XML and GitHub annotations on request', () => {
    const junit = join(dir, 'heaphook.xml');
    const r = heaphook([
      'check',
      log,
      '--max-peak',
      '1GiB',
      '--max-leaked',
      '0',
      '--junit',
      junit,
      '--github',
    ]);
    expect(r.status).toBe(1);
    const xml = readFileSync(junit, 'utf8');
    expect(xml).toMatch(/<testsuite name="heaphook check .*" tests="2" failures="1">/);
    expect(xml).toMatch(
      /<testcase classname="heaphook\.check\.heaplog\.\d+\.log" name="max-peak"\/>/,
    );
    expect(xml).toMatch(/<testcase [^>]*name="max-leaked">\s*<failure message="FAIL max-leaked: /);
    // The annotation points at the leak's source line in the checkout (cwd: the package).
    expect(r.stdout).toMatch(
      /^::error file=test\/native\/workload\.c,line=\d+,title=heaphook check%3A max-leaked::FAIL max-leaked: /m,
    );
  });

  it('a bad limit, no limit, or a bad limits file is a usage error naming the fix', () => {
    expect(heaphook(['check', log]).stderr).toMatch(/give at least one limit, e\.g\. --max-peak/);
    const bad = heaphook(['check', log, '--max-peak', '12Q']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/--max-peak 12Q: give a size in bytes .*e\.g\. --max-peak 64MiB/);
    const file = join(dir, 'bad.json');
    writeFileSync(file, '{"max-heap": 1}');
    expect(heaphook(['check', log, '--limits', file]).stderr).toMatch(
      /unknown limit "max-heap" \(known: max-peak, /,
    );
  });

  it('a limit the log cannot answer fails instead of passing unseen', () => {
    const r = heaphook(['check', log, '--max-mapped', '1GiB']);
    // recorded standalone without ucm-hooks: no mapped memory in the log
    expect(r.status).toBe(1);
    expect(r.stdout).toMatch(/^FAIL max-mapped: the log has no figure for mapped memory/m);
  });
});

/**
 * Reports a person can act on, on programs nobody here wrote: gcc (whose work is done by cc1),
 * python3, sqlite3 and node, recorded here on small inputs. `report DIR` names the program a
 * person expects and says why; no top-20 site is named by an allocator's own function; a stack
 * cut at HEAPHOOK_STACK_DEPTH ends with [truncated]; and the messages of issue 37 read as they
 * should: check's verdict line, --top, --formats, a pprof input, known leaks suppressed.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it, vi } from 'vitest';

import { ALLOCATOR_FRAMES, SiteNamer } from '../../src/report/sites.js';
import { parseSuppressions, suppressionOf } from '../../src/report/suppressions.js';
import { passText } from '../../src/recommend/command.js';
import { percentOf, progressLines } from '../../src/decode/progress.js';
import type { ReportJson } from '../../src/report/json.js';
import { heaphookBin, python3, scratch } from '../helpers.js';

function heaphook(args: string[], cwd?: string) {
  return spawnSync(process.execPath, [heaphookBin, ...args], {
    encoding: 'utf8',
    timeout: 180_000,
    maxBuffer: 256 * 1024 * 1024,
    ...(cwd !== undefined ? { cwd } : {}),
  });
}

function record(dir: string, command: string[], env: string[] = []) {
  const run = heaphook(['record', '-o', dir, ...env.flatMap((e) => ['-e', e]), '--', ...command]);
  expect(run.status, run.stderr).toBe(0);
  return run;
}

const reports = new Map<string, ReportJson>();

/** `report --json` of a log or folder (each asked once: symbolising node takes seconds). */
function reportJson(target: string, extra: string[] = []): ReportJson {
  const key = [target, ...extra].join('\0');
  const known = reports.get(key);
  if (known !== undefined) return known;
  const run = heaphook(['report', '--json', target, ...extra]);
  expect(run.status, run.stderr).toBe(0);
  const j = JSON.parse(run.stdout) as ReportJson;
  reports.set(key, j);
  return j;
}

/** The function of a JSON frame: `function [inlined] (file:line) [module+0x...]`. */
function functionOf(frame: string): string {
  return frame
    .replace(/ \[inlined\]/, '')
    .replace(/ \(.*$/, '')
    .replace(/ \[[^\]]*\]$/, '');
}

/** Every site list of a report: the top-20 tables, the leaks, the mappings. */
function siteLists(j: ReportJson): { site: string; stack: string[] }[][] {
  return [
    j.topSites,
    j.topSitesByCount,
    j.topSitesByBytes,
    j.leakSites,
    j.mappedMemory?.topSites ?? [],
  ];
}

/** A few names from the built-in list a row must never be named by (the list's own test). */
const ALLOCATOR_NAMES = [
  'malloc',
  'calloc',
  'realloc',
  'operator new(unsigned long)',
  '_PyObject_Malloc',
  'PyObject_Malloc',
  'PyMem_Malloc',
  'PyMem_RawMalloc',
  'g_malloc',
  'xmalloc',
  'CRYPTO_zalloc',
  'sqlite3Malloc',
  'sqlite3DbMallocRawNN',
];

function expectNoAllocatorSite(j: ReportJson): void {
  const namer = new SiteNamer();
  for (const list of siteLists(j)) {
    expect(list.length).toBeLessThanOrEqual(20);
    for (const s of list) {
      expect(s.stack).toContain(s.site);
      const fn = functionOf(s.site);
      expect(ALLOCATOR_NAMES, `${s.site}\n  in ${s.stack.join('\n     ')}`).not.toContain(fn);
      // Named by a frame outside the allocators whenever the stack has one.
      const outside = s.stack.some((f) => !namer.isAllocator({ function: functionOf(f) }));
      if (outside) expect(namer.isAllocator({ function: fn }), s.site).toBe(false);
    }
  }
}

describe('the built-in allocator list', () => {
  it('names the allocator families the README lists, and no ordinary function', () => {
    const namer = new SiteNamer();
    for (const fn of ALLOCATOR_NAMES) expect(namer.isAllocator({ function: fn }), fn).toBe(true);
    for (const fn of ['main', 'PyList_New', 'sqlite3VdbeExec', 'c_parser_translation_unit']) {
      expect(namer.isAllocator({ function: fn }), fn).toBe(false);
    }
    expect(ALLOCATOR_FRAMES.length).toBeGreaterThan(10);
    // --skip-frames adds to it
    expect(new SiteNamer([/^PyList_/]).isAllocator({ function: 'PyList_New' })).toBe(true);
  });

  it('in a stripped binary, a frame without source called from an allocator is the allocator', () => {
    const namer = new SiteNamer();
    // sqlite's static malloc wrapper takes the name of the exported symbol before it
    const frames = [
      { function: 'sqlite3ApiExit' },
      { function: 'sqlite3Realloc' },
      { function: 'sqlite3VdbeSorterWrite' },
    ];
    expect(namer.siteIndex(frames)).toBe(2);
    // with source information a frame is trusted
    expect(namer.siteIndex([{ function: 'f', file: 'f.c' }, { function: 'malloc' }])).toBe(0);
  });
});

describe('progress', () => {
  it('never shows past 100 %, even when a pass sees more events than the first counted', () => {
    expect(percentOf(150, 100)).toBe(100);
    expect(passText(2, 120, 100)).toBe('pass 2: 100 % (120 of 120 events)');
    expect(passText(2, 50, 100)).toBe('pass 2: 50 % (50 of 100 events)');
    expect(passText(1, 1234, undefined)).toBe('pass 1: 1,234 events');
  });

  /** progressLines(prefix) on a fake clock: `at(ms, text)` updates it at that time; the lines
   * written so far. */
  function linesOnFakeClock(
    prefix: string,
    run: (at: (ms: number, text: string | (() => string)) => void) => void,
  ): string[] {
    vi.useFakeTimers();
    try {
      vi.setSystemTime(0);
      const written: string[] = [];
      const stream = {
        write: (text: string) => written.push(text),
      } as unknown as NodeJS.WritableStream;
      const lines = progressLines(prefix, stream);
      run((ms, text) => {
        vi.setSystemTime(ms);
        lines.update(text);
      });
      return written;
    } finally {
      vi.useRealTimers();
    }
  }

  it('off a terminal: nothing for the first 2 s, then a line every 5 s', () => {
    const written = linesOnFakeClock('heaphook recommend', (at) => {
      at(0, 'pass 1: 10 events');
      at(1_999, 'pass 1: 20 events');
      at(2_000, 'pass 1: 30 events');
      at(6_000, 'pass 1: 40 events');
      at(7_000, 'pass 2: 50 % (5 of 10 events)');
    });
    expect(written).toEqual([
      'heaphook recommend: pass 1: 30 events\n',
      'heaphook recommend: pass 2: 50 % (5 of 10 events)\n',
    ]);
  });

  it('makes a text given as a function only for the lines it writes', () => {
    let made = 0;
    const text = (): string => `${++made} made`;
    const written = linesOnFakeClock('heaphook report', (at) => {
      for (const ms of [0, 1_000, 2_000, 3_000, 4_000, 7_000]) at(ms, text);
    });
    expect(written).toEqual(['heaphook report: 1 made\n', 'heaphook report: 2 made\n']);
  });
});

describe('suppressions', () => {
  it("reads LSan's format (KDE heaptrack reads the same): leak:PATTERN, * and ^ $", () => {
    const rules = parseSuppressions(
      '# known leaks\nleak:known_leak\nleak:^libfoo*.so$\nrace:ignored_by_lsan\n\n',
      'f',
    );
    expect(rules.map((r) => r.pattern)).toEqual(['known_leak', '^libfoo*.so$']);
    const frame = (fn: string, module = '/usr/lib/libbar.so') => ({
      pc: 1,
      function: fn,
      module,
      offset: 0,
      inlined: false,
    });
    expect(suppressionOf([frame('my_known_leak_helper')], rules)?.pattern).toBe('known_leak');
    expect(suppressionOf([frame('x', 'libfoo1.so')], rules)?.pattern).toBe('^libfoo*.so$');
    expect(suppressionOf([frame('x', '/lib/libfoo1.so')], rules)).toBeUndefined();
    expect(() => parseSuppressions('known_leak\n', 'sup.txt')).toThrow(
      /sup\.txt:1: "known_leak" is not a suppression; write leak:FUNCTION_OR_LIBRARY/,
    );
  });

  const dir = scratch('real-suppressions');
  const program = join(dir, 'leaker');
  beforeAll(() => {
    writeFileSync(
      join(dir, 'leaker.c'),
      `#include <stdlib.h>
#include <string.h>
/* Eight blocks from each site, every pointer dropped: the leak check finds them unreachable. */
__attribute__((noinline)) void *known_leak(size_t n) { void *p = malloc(n); memset(p, 1, n); return p; }
__attribute__((noinline)) void *new_leak(size_t n) { void *p = malloc(n); memset(p, 2, n); return p; }
int main(int argc, char **argv) {
  int fresh = argc > 1 && strcmp(argv[1], "new") == 0;
  for (int i = 1; i <= 8; i++) {
    known_leak(1000 * i);
    if (fresh) new_leak(3000 * i);
  }
  return 0;
}
`,
    );
    const cc = spawnSync('cc', ['-g', '-O0', '-o', program, join(dir, 'leaker.c')], {
      encoding: 'utf8',
    });
    expect(cc.status, cc.stderr).toBe(0);
    record(join(dir, 'old'), [program]);
    record(join(dir, 'new'), [program, 'new']);
    writeFileSync(join(dir, 'known.supp'), '# a leak on purpose\nleak:known_leak\n');
  }, 120_000);

  it('a CI gate with --max-leaked 0 passes when the only leaks are suppressed, and shows them apart', () => {
    const gate = heaphook([
      'check',
      join(dir, 'old'),
      '--max-leaked',
      '0',
      '--suppressions',
      join(dir, 'known.supp'),
      '--no-default-suppressions',
    ]);
    expect(gate.status, gate.stdout + gate.stderr).toBe(0);
    expect(gate.stdout).toMatch(/^ok {3}max-leaked: 0 B <= 0 B$/m);
    expect(gate.stdout).toMatch(
      /^ {5}suppressed leaks \(not counted\): 8 blocks, 35\.2 KiB \(36000 B\) by .*known\.supp$/m,
    );
    expect(gate.stdout).toMatch(/^1 limit met$/m);
    // without the suppressions the same run fails
    const bare = heaphook(['check', join(dir, 'old'), '--max-leaked', '0']);
    expect(bare.status).toBe(1);
    expect(bare.stdout).toMatch(/^1 of 1 limit exceeded: max-leaked$/m);
  });

  it('fails on a new leak, naming it, and the report lists suppressed leaks apart', () => {
    const gate = heaphook([
      'check',
      join(dir, 'new'),
      '--max-leaked',
      '0',
      '--suppressions',
      join(dir, 'known.supp'),
    ]);
    expect(gate.status).toBe(1);
    expect(gate.stdout).toMatch(/^FAIL max-leaked: 105 KiB \(108000 B\) > 0 B/m);
    expect(gate.stdout).toMatch(/^ {9}new_leak \(.*leaker\.c:\d+\)/m);
    const j = reportJson(join(dir, 'new'), ['--suppressions', join(dir, 'known.supp')]);
    expect(j.leakedBytes).toBe(108_000);
    expect(j.suppressedLeakedBytes).toBe(36_000);
    expect(j.suppressedLeakedBlocks).toBe(8);
    expect(j.suppressedLeakSites).toHaveLength(1);
    expect(functionOf(j.suppressedLeakSites[0]!.site)).toBe('known_leak');
    expect(j.suppressedLeakSites[0]!.suppression).toBe('leak:known_leak');
    const text = heaphook(['report', join(dir, 'new'), '--suppressions', join(dir, 'known.supp')]);
    expect(text.stdout).toMatch(
      /^suppressed \(known leaks, not counted above\): 8 blocks, 35\.2 KiB \(36,000 bytes\) by .*known\.supp$/m,
    );
    expect(text.stdout).toMatch(
      /^ {2}known_leak: 8 blocks, 35\.2 KiB \(leak:known_leak, .*known\.supp:2\)$/m,
    );
  });

  it("reads the project's .heaphook-suppressions from the working directory or a parent", () => {
    const project = join(dir, 'project');
    const sub = join(project, 'build');
    spawnSync('mkdir', ['-p', sub]);
    writeFileSync(join(project, '.heaphook-suppressions'), 'leak:known_leak\n');
    const gate = heaphook(['check', join(dir, 'old'), '--max-leaked', '0'], sub);
    expect(gate.status, gate.stdout).toBe(0);
    expect(gate.stdout).toContain(join(project, '.heaphook-suppressions'));
    const off = heaphook(
      ['check', join(dir, 'old'), '--max-leaked', '0', '--no-default-suppressions'],
      sub,
    );
    expect(off.status).toBe(1);
  });
});

describe('gcc: the program is cc1, which did the work', () => {
  const dir = scratch('real-gcc');
  const rec = join(dir, 'rec');
  let recorded: ReturnType<typeof record>;
  beforeAll(() => {
    // ~200 KB of C that cc1 parses quickly at -O2: one table of numbers and a function
    const numbers = Array.from({ length: 33_000 }, (_, i) => (i * 7919) % 100_000).join(',');
    writeFileSync(
      join(dir, 'gen.c'),
      `const int t[]={${numbers}};\nint get(int i){return t[i];}\n`,
    );
    recorded = record(rec, ['gcc', '-O2', '-c', join(dir, 'gen.c'), '-o', join(dir, 'gen.o')]);
  }, 180_000);

  it("record's closing lines name each program once and the log report reads", () => {
    const err = recorded.stderr;
    expect(err).toMatch(
      /^heaphook record: 3 logs in .*; report .* reads .*heaplog\.\d+\.log: cc1 \(pid \d+\) did [\d,]+ events, [\d,]+× the [\d,]+ of gcc \(pid \d+\), the program record started/m,
    );
    for (const name of ['cc1', 'gcc']) {
      expect(err.match(new RegExp(`^ {2}${name} \\(pid`, 'gm')), name).toHaveLength(1);
    }
    // as did less than a tenth of cc1's work: summarised
    expect(err).toMatch(/^ {2}and 1 shim and short-lived child \([\d,]+ events in all\): as$/m);
    expect(err).not.toMatch(/heaphook record: wrote/);
  });

  it('report DIR reads cc1, says why, and lists the other logs', () => {
    const run = heaphook(['report', rec, '--top', '3']);
    expect(run.status, run.stderr).toBe(0);
    const lines = run.stdout.split('\n');
    expect(lines[0]).toMatch(
      /^program: cc1 \(pid \d+\) did [\d,]+ events, [\d,]+× the [\d,]+ of gcc \(pid (\d+)\), the program record started; a descendant that does 10× or more the program's events is the one reported \(--pid \d+ for gcc\); its log is heaplog\.\d+\.log$/,
    );
    expect(lines[1]).toMatch(/^other logs of the session \(heaphook report .* --pid N\):$/);
    expect(lines[2]).toMatch(/^ +pid {2}program +events +peak$/);
    const table = lines.slice(3, 5).join('\n');
    expect(table).toMatch(/^ +\d+ {2}gcc +[\d,]+ +[\d.]+ [KM]iB$/m);
    expect(table).toMatch(/^ +\d+ {2}as +[\d,]+ +[\d.]+ [KM]iB$/m);
    expect(run.stdout).toMatch(/^process: \d+ \/\S+\/cc1 /m);
    // --top 3: three rows in every table
    for (const title of ['peak contribution', 'allocations', 'bytes allocated']) {
      const at = run.stdout.indexOf(`top sites by ${title}:`);
      const table = run.stdout.slice(at).split('\ntop ')[0]!;
      expect(table.match(/^ {2}#\d+ /gm), title).toHaveLength(3);
    }
  });

  it('no top-20 site is an allocator (xmalloc, ggc_internal_alloc ...)', () => {
    const j = reportJson(rec);
    expect(j.argv[0]).toMatch(/\/cc1$/);
    expect(j.topSites).toHaveLength(20);
    expectNoAllocatorSite(j);
    expect(j.topSites.some((s) => s.site !== s.stack[0])).toBe(true);
  });

  it('--pid names gcc itself, without the choice line', () => {
    const text = heaphook(['report', rec, '--top', '1']).stdout;
    const gcc = /of gcc \(pid (\d+)\)/.exec(text)![1]!;
    const run = heaphook(['report', rec, '--pid', gcc, '--top', '1']);
    expect(run.stdout).toMatch(/^log: /);
    expect(run.stdout).toMatch(/^process: \d+ gcc -O2 -c /m);
  });

  it('-o DIR --formats writes those files only; an unknown format names the known ones', () => {
    const out = join(dir, 'out');
    const run = heaphook(['report', rec, '-o', out, '--formats', 'svg,json,pprof']);
    expect(run.status, run.stderr).toBe(0);
    expect(readdirSync(out).sort()).toEqual(['heap.svg', 'profile.pb.gz', 'summary.json']);
    const bad = heaphook(['report', rec, '-o', out, '--formats', 'html,gif']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(
      /--formats html,gif: unknown format gif; choose among html,svg,png,pdf,flamegraph,pprof,speedscope,perfetto,json/,
    );
    // a pprof profile given to report is named as one, with what opens it
    const pprof = heaphook(['report', join(out, 'profile.pb.gz')]);
    expect(pprof.status).toBe(2);
    expect(pprof.stderr).toContain(
      `${join(out, 'profile.pb.gz')} is a pprof profile (gzip'd protobuf, as heaphook snapshot and report -o write), not a heaplog: open it with go tool pprof -http=: ${join(out, 'profile.pb.gz')}`,
    );
    expect(pprof.stderr).not.toMatch(/damaged/);
  });

  it('check says how many limits were exceeded, and which', () => {
    const run = heaphook(['check', rec, '--max-peak', '1MiB', '--max-allocations', '10']);
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(/^2 of 2 limits exceeded: max-peak, max-allocations$/m);
    expect(run.stdout).not.toMatch(/passed/);
  });
});

describe('python3, sqlite3, node: the program, and sites past the allocators', () => {
  const dir = scratch('real-programs');
  const programs: Record<string, string[]> = {
    python3: [
      python3,
      '-c',
      "import json; print(len(json.dumps([{'a': i} for i in range(5000)])))",
    ],
    sqlite3: [
      'sqlite3',
      ':memory:',
      'create table t(a,b); with recursive c(x) as (select 1 union all select x+1 from c where x<3000) insert into t select x, hex(randomblob(20)) from c; create index i on t(b); select count(*) from t;',
    ],
    node: [process.execPath, '-e', "const a=[];for(let i=0;i<20000;i++)a.push({i,s:'x'+i});"],
  };
  beforeAll(() => {
    expect(existsSync('/usr/bin/sqlite3'), 'tools/install-system-packages.sh: sqlite3').toBe(true);
    for (const [name, command] of Object.entries(programs)) record(join(dir, name), command);
  }, 180_000);

  for (const name of ['python3', 'sqlite3', 'node']) {
    it(`${name}: report DIR names it and why; no top-20 site is an allocator's`, () => {
      const text = heaphook(['report', join(dir, name), '--top', '1']);
      expect(text.status, text.stderr).toBe(0);
      expect(text.stdout.split('\n')[0]).toMatch(
        new RegExp(`^program: ${name}\\S* \\(pid \\d+\\) is the program record started`),
      );
      const j = reportJson(join(dir, name));
      expect(j.argv[0]!.replace(/^.*\//, '')).toMatch(new RegExp(`^${name}`));
      expectNoAllocatorSite(j);
    });
  }

  it('python3: the sites are named past _PyObject_Malloc and PyMem_*, the stack kept whole', () => {
    const j = reportJson(join(dir, 'python3'));
    const through = j.topSitesByCount.filter((s) => s.stack.indexOf(s.site) > 0);
    expect(through.length).toBeGreaterThan(0);
    for (const s of through) {
      const inner = s.stack.slice(0, s.stack.indexOf(s.site)).map(functionOf);
      expect(inner.length).toBeGreaterThan(0);
    }
  });

  it('inlined frames come once, marked [inlined]', () => {
    for (const name of Object.keys(programs)) {
      const j = reportJson(join(dir, name));
      for (const s of [...j.topSites, ...j.topSitesByCount, ...j.topSitesByBytes]) {
        for (let i = 1; i < s.stack.length; i++) {
          const [a, b] = [s.stack[i - 1]!, s.stack[i]!];
          if (a.includes(' [inlined]') || b.includes(' [inlined]'))
            expect(functionOf(a), s.stack.join('\n')).not.toBe(functionOf(b));
        }
      }
    }
  });

  it('a stack cut at HEAPHOOK_STACK_DEPTH ends with a [truncated] root frame', () => {
    const cut = join(dir, 'python3-cut');
    record(cut, programs.python3!, ['HEAPHOOK_STACK_DEPTH=6']);
    const j = reportJson(cut);
    const cutStacks = j.topSites.filter((s) => s.stack.at(-1) === '[truncated]');
    expect(cutStacks.length).toBeGreaterThan(0);
    for (const s of j.topSites) expect(s.stack.indexOf('[truncated]')).toBeGreaterThanOrEqual(-1);
    for (const s of j.topSites) {
      const at = s.stack.indexOf('[truncated]');
      if (at >= 0) expect(at).toBe(s.stack.length - 1); // the root, never a caller in between
    }
    const text = heaphook(['report', cut, '--top', '20']);
    expect(text.stdout).toMatch(/^ {6}\[truncated\]$/m);
  });
});

/**
 * Hostile text and inputs that never end (issue 35, items 6 and 7).
 *
 * A program whose symbols are named `::error file=forged.c…`, `::add-mask::secret`,
 * `::stop-commands::tok`, `x##[error]…`, an ESC sequence and a name with newlines, whose DWARF
 * file name holds newlines and whose argv holds ESC, `::warning::` and a bidi override
 * (test/native/hostile_names.c, hostile_path.c): a GitHub Actions runner reads no command in
 * anything heaphook prints but heaphook's own annotations; the JUnit XML and the SVG files are
 * well-formed XML; no output carries a raw control character; and the symboliser keeps every
 * name in its own frame, so no frame moves to another stack.
 *
 * Inputs that never end or cannot be read (a FIFO, /dev/zero, /proc/self/mem) are one line
 * and exit status 2 within seconds; `report --diff` refuses a damaged side (exit 3, naming it)
 * and warns when the runs are of different programs; an out-of-range pid and a descriptor
 * limit that keeps the tracer from starting are said in one line.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { unmet } from '@heaphook/core/testing';

import { framesOfAnswer, splitAnswers, Symbolizer } from '../../src/report/symbolize.js';
import { summarize, framesOf } from '../../src/index.js';
import { block, deflateBomb, fileHeader } from '../fuzz/corpus.js';
import { expectCleanError, heaphookCli, MEMORY_BOUND, type CliRun } from '../fuzz/harness.js';
import { logsIn, packageDir, scratch, traced, workload } from '../helpers.js';

/** The hostile_* functions of test/native/hostile_names.c and the names they get. */
const NAMES: Readonly<Record<string, string>> = {
  hostile_error: '::error file=forged.c,line=1::forged by a symbol',
  hostile_mask: '::add-mask::secret',
  hostile_stop: '::stop-commands::tok',
  hostile_legacy: 'x##[error]legacy command',
  hostile_newline: 'evil\nfake_frame\n/etc/passwd:1\nmain',
  hostile_escape: '\u001b]0;pwned\u0007\u001b[31mred\u001b[0m',
};
/** hostile_path.c's `#line` file name, as gcc splits it into a directory and a name. */
const PATH_FILE = 'hostile\nfake_frame at /etc/passwd:1\npath.c';
const ARGV = ['\u001b[2J::warning::argv', '##[add-mask]argv', '\u202eevil'];

function run(command: string, args: readonly string[], cwd?: string) {
  const r = spawnSync(command, args, { encoding: 'utf8', ...(cwd ? { cwd } : {}) });
  expect(r.error, `${command}: is it installed?`).toBeUndefined();
  expect(r.status, `${command} ${args.join(' ')}: ${r.stderr}`).toBe(0);
  return r;
}

/** Compiles the hostile program: its names renamed by objcopy, its file name by `#line`. */
function buildHostile(dir: string): string {
  const native = join(packageDir, 'test', 'native');
  const flags = ['-O0', '-fno-builtin', '-fno-omit-frame-pointer'];
  run('cc', [...flags, '-c', join(native, 'hostile_names.c'), '-o', 'names.o'], dir);
  run('cc', [...flags, '-gdwarf-4', '-c', join(native, 'hostile_path.c'), '-o', 'path.o'], dir);
  const renames = Object.entries(NAMES).flatMap(([from, to]) => [
    '--redefine-sym',
    `${from}=${to}`,
  ]);
  run('objcopy', [...renames, 'names.o', 'renamed.o'], dir);
  run('cc', ['-o', 'hostile', 'renamed.o', 'path.o'], dir);
  return join(dir, 'hostile');
}

const dir = scratch('hostile');
const program = buildHostile(dir);
const traceRun = traced(dir, program, ARGV);
expect(traceRun.status, traceRun.stderr).toBe(0);
const log = logsIn(dir)[0]!;

/** A run of the heaphook CLI, with a 30 s watchdog (heaphookCli's timeout kills a hung run:
 * a hang fails the test, never stalls it). */
function heaphook(args: readonly string[]): CliRun {
  return heaphookCli(args, 30_000);
}

/** The outputs several tests read, each run once. */
const junit = join(dir, 'check.xml');
const outDir = join(dir, 'report');
const once = new Map<string, CliRun>();
function shared(name: 'check' | 'report -o' | 'report --json' | 'diff itself'): CliRun {
  const args = {
    check: [
      'check',
      log,
      '--max-leaked',
      '0',
      '--max-allocations',
      '0',
      '--github',
      '--junit',
      junit,
    ],
    'report -o': ['report', log, '-o', outDir],
    'report --json': ['report', log, '--json'],
    'diff itself': ['report', log, '--diff', log],
  }[name];
  if (!once.has(name)) once.set(name, heaphook(args));
  return once.get(name)!;
}

/** The workflow commands a GitHub Actions runner would obey in this output, as it parses them:
 * `::name …::` after leading white space (ActionCommand.TryParseV2), `##[name …]` anywhere in a
 * line (the legacy TryParse, which the runner tries next). */
const RUNNER_COMMANDS = new Set([
  'add-mask',
  'add-matcher',
  'add-path',
  'debug',
  'echo',
  'endgroup',
  'error',
  'group',
  'notice',
  'remove-matcher',
  'save-state',
  'set-env',
  'set-output',
  'stop-commands',
  'warning',
]);
interface RunnerCommand {
  readonly name: string;
  readonly properties: Record<string, string>;
  readonly data: string;
}
function runnerCommands(output: string): RunnerCommand[] {
  const found: RunnerCommand[] = [];
  const unescape = (s: string, property: boolean): string =>
    (property ? s.replace(/%3A/g, ':').replace(/%2C/g, ',') : s)
      .replace(/%0D/g, '\r')
      .replace(/%0A/g, '\n')
      .replace(/%25/g, '%');
  for (const line of output.split('\n')) {
    const trimmed = line.trimStart();
    const end = trimmed.indexOf('::', 2);
    if (trimmed.startsWith('::') && end > 0) {
      const info = trimmed.slice(2, end);
      const space = info.indexOf(' ');
      const name = space < 0 ? info : info.slice(0, space);
      if (RUNNER_COMMANDS.has(name)) {
        const properties: Record<string, string> = {};
        for (const p of space < 0 ? [] : info.slice(space + 1).split(',')) {
          const [key, value] = p.split('=', 2);
          if (key !== undefined && value !== undefined) properties[key] = unescape(value, true);
        }
        found.push({ name, properties, data: unescape(trimmed.slice(end + 2), false) });
        continue;
      }
    }
    const legacy = /##\[([\w-]+)[^\]]*\](.*)$/.exec(line);
    if (legacy !== null && RUNNER_COMMANDS.has(legacy[1]!)) {
      found.push({ name: legacy[1]!, properties: {}, data: legacy[2]! });
    }
  }
  return found;
}

/** Control characters and other code points that must never reach a terminal raw (a newline
 * only between lines). */
const RAW_UNSAFE =
  /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;

describe('hostile names in what heaphook writes for people', () => {
  it('check --github: the runner reads heaphook\u2019s own ::error lines and no other command', () => {
    const r = shared('check');
    expect(r.status, r.errorLines.join('\n')).toBe(1);
    const commands = runnerCommands(r.stdout);
    expect(commands.map((c) => c.name)).toEqual(['error', 'error']);
    expect(commands.map((c) => c.properties.title)).toEqual([
      'heaphook check: max-leaked',
      'heaphook check: max-allocations',
    ]);
    for (const c of commands) expect(c.properties.file).toBeUndefined();
    // The names are there, shown, not obeyed.
    expect(r.stdout).toContain('\\x3a:add-mask::secret');
    expect(r.stdout).toContain('\\x3a:stop-commands::tok');
    expect(r.stdout).toContain('\\x3a:error file=forged.c,line=1::forged by a symbol');
    expect(r.stdout).toContain('x\\x23#[error]legacy command');
    expect(r.stdout).toContain('\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m');
    expect(r.stdout).not.toMatch(RAW_UNSAFE);
  });

  it('JUnit XML, the flame graph and the heap chart are well-formed XML (xmllint --noout)', (ctx) => {
    const why = unmet('xmllint');
    if (why !== undefined) ctx.skip(why);
    const out = outDir;
    expect(shared('check').status).toBe(1);
    const r = shared('report -o');
    expect(r.status, r.errorLines.join('\n')).toBe(0);
    const files = [junit, join(out, 'flamegraph.svg'), join(out, 'heap.svg')];
    const lint = spawnSync('xmllint', ['--noout', ...files], { encoding: 'utf8' });
    expect(lint.stderr).toBe('');
    expect(lint.status).toBe(0);
    expect(readFileSync(junit, 'utf8')).toContain('\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m');
    expect(readFileSync(join(out, 'heap.svg'), 'utf8')).toContain('\\x1b[2J');
    expect(readFileSync(join(out, 'report.html'), 'utf8')).not.toMatch(RAW_UNSAFE);
  });

  it('no text output carries a raw control character or a command the runner would obey', () => {
    const outputs = [
      shared('report -o'),
      heaphook(['dump', '--stacks', log]),
      heaphook(['dump', '--summary', log]),
      shared('diff itself'),
      heaphook(['recommend', log]),
    ];
    for (const o of outputs) {
      const text = `${o.stdout}\n${o.errorLines.join('\n')}`;
      expect(text).not.toMatch(RAW_UNSAFE);
      expect(runnerCommands(text)).toEqual([]);
    }
    const [report, dump] = outputs;
    expect(report!.stdout).toContain(
      String.raw`${program} "\u001b[2J::warning::argv" "\x23#[add-mask]argv" "\u202eevil"`,
    );
    expect(dump!.stdout).toMatch(/^# process pid=\d+ ppid=\d+ exe=\S+hostile argv=/m);
    // recommend's command line gives the argv back to bash exactly ($'...').
    expect(outputs[4]!.stdout).toContain("$'\\x1b[2J::warning::argv' $'\\x23#[add-mask]argv'");
  });

  it('--json gives argv back exactly and shows the names as the text does', () => {
    const r = shared('report --json');
    expect(r.status).toBe(0);
    expect(r.stdout).not.toMatch(RAW_UNSAFE);
    expect(r.stdout).not.toContain('##[');
    const json = JSON.parse(r.stdout) as { argv: string[]; leakSites: { stack: string[] }[] };
    expect(json.argv).toEqual([program, ...ARGV]);
    const frames = json.leakSites.flatMap((s) => s.stack);
    expect(frames.some((f) => f.startsWith('\\x1b]0;pwned\\x07'))).toBe(true);
  });
});

describe('the symboliser: a newline in a name never moves a frame to another stack', () => {
  it('each stack reads as the program wrote it; the names with newlines stay whole', () => {
    const json = JSON.parse(shared('report --json').stdout) as {
      leakSites: { bytes: number; stack: string[] }[];
    };
    /** The program's own frames of the leak site of that many bytes, without their module. */
    const functions = (bytes: number): string[] =>
      json.leakSites
        .find((s) => s.bytes === bytes)!
        .stack.filter((f) => f.endsWith(']') && f.includes(` [${program}+0x`))
        .map((f) => f.replace(/ \[[^\]]*\]$/, ''));
    expect(functions(500)).toEqual(['honest_site', 'main', '_start']);
    expect(functions(1000)).toEqual([
      `path_site (${dir}/hostile\\x0afake_frame at /etc/passwd:1\\x0apath.c:8)`,
      'main',
      '_start',
    ]);
    expect(functions(2000)).toEqual([
      'evil\\x0afake_frame\\x0a/etc/passwd:1\\x0amain',
      '\\x1b]0;pwned\\x07\\x1b[31mred\\x1b[0m',
      'main',
      '_start',
    ]);
    expect(functions(3000)).toEqual([
      'x\\x23#[error]legacy command',
      '\\x3a:stop-commands::tok',
      '\\x3a:add-mask::secret',
      '\\x3a:error file=forged.c,line=1::forged by a symbol',
      'main',
      '_start',
    ]);
    for (const f of json.leakSites.flatMap((s) => s.stack)) {
      expect(f).not.toMatch(/^(fake_frame|\/etc\/passwd)/);
    }
  });

  it('the API keeps the raw names: one frame per address, the DWARF file name exact', async () => {
    const s = await summarize(log);
    const pcs = [...new Set(s.leakSites.flatMap((site) => framesOf(s.stacks, site.stack)))];
    const frames = await new Symbolizer(s.modules).symbolize(pcs);
    const all = [...frames.values()];
    const newline = all.find((f) => f[0]?.function.startsWith('evil'))!;
    expect(newline).toHaveLength(1);
    expect(newline[0]!.function).toBe(NAMES.hostile_newline);
    const path = all.find((f) => f[0]?.function === 'path_site')!;
    expect(path).toHaveLength(1);
    expect(path[0]!.file).toBe(`${dir}/${PATH_FILE}`);
    expect(path[0]!.line).toBe(8);
  });

  it('addr2line output is cut at random fences: a name holding address lines or a guessed fence stays in its answer', () => {
    const fence = 0xc123456789abcdefn;
    const text = [
      '0x0000000000001000',
      'evil',
      '0x0000000000002000', // the next address's line, forged
      '0xc000000000000000', // a wrong guess at the fence
      '??:0',
      '0xc123456789abcdef',
      '??',
      '??:0',
      '0x0000000000002000',
      'main',
      'main.c:3',
      '0xc123456789abcdef',
      '??',
      '??:0',
      '',
    ].join('\n');
    expect(splitAnswers(text, [0x1000, 0x2000], fence)).toEqual([
      ['evil', '0x0000000000002000', '0xc000000000000000', '??:0'],
      ['main', 'main.c:3'],
    ]);
    // Cut short, or the fence's answer missing: nothing of the batch is believed.
    expect(splitAnswers(text.slice(0, text.lastIndexOf('0xc1')), [0x1000, 0x2000], fence)).toBe(
      undefined,
    );
    // 32-bit files: addr2line cuts addresses (the fence's too) to 8 digits.
    expect(splitAnswers('0x00001000\nf\na.c:1\n0x89abcdef\n??\n??:0\n', [0x1000], fence)).toEqual([
      ['f', 'a.c:1'],
    ]);
    expect(framesOfAnswer(['inl', 'a.h:2', 'f', 'a.c:1'])).toEqual([
      { function: 'inl', file: 'a.h', line: 2 },
      { function: 'f', file: 'a.c', line: 1 },
    ]);
    // A newline in a file name: the answer without -f says which last lines are the place.
    expect(framesOfAnswer(['f', 'dir', 'x', 'a.c:1'], ['dir', 'x', 'a.c:1'])).toEqual([
      { function: 'f', file: 'dir\nx\na.c', line: 1 },
    ]);
    // Without it, every line but the last is the function: exact for a name with newlines.
    expect(framesOfAnswer(['evil', 'fake_frame', '/etc/passwd:1', 'main', '??:0'])).toEqual([
      { function: NAMES.hostile_newline },
    ]);
  });
});

describe('inputs that never end or cannot be read: one line, exit status 2, within seconds', () => {
  const fifo = join(dir, 'a-fifo');
  run('mkfifo', [fifo]);
  const big = join(dir, 'big-limits.json');
  writeFileSync(big, `{"max-peak": "64MiB"${' '.repeat(70_000)}}`);
  // Each run has a 30 s watchdog (heaphookCli's timeout kills it): a hang fails, never waits.
  const cases: [string, string[], RegExp][] = [
    [
      'check --limits FIFO',
      ['check', log, '--limits', fifo],
      /--limits \S+ is a FIFO \(named pipe\), not a regular file; give a JSON file/,
    ],
    [
      'check --limits /dev/zero',
      ['check', log, '--limits', '/dev/zero'],
      /--limits \/dev\/zero is a character device, not a regular file/,
    ],
    [
      'check --limits over 64 KiB',
      ['check', log, '--limits', big],
      /--limits \S+ holds more than 65536 bytes, the most it may/,
    ],
    [
      'check --junit FIFO',
      ['check', log, '--max-peak', '1GiB', '--junit', fifo],
      /--junit \S+ is a FIFO \(named pipe\), not a regular file; give the path of a file/,
    ],
    [
      'report /proc/self/mem',
      ['report', '/proc/self/mem'],
      /\/proc\/self\/mem cannot be read: input\/output error \(EIO\); give a heaplog file/,
    ],
    [
      'check --limits /proc/self/mem',
      ['check', log, '--limits', '/proc/self/mem'],
      /cannot be read: input\/output error \(EIO\)/,
    ],
  ];
  for (const [what, args, message] of cases) {
    it(what, () => {
      const r = heaphook(args);
      expectCleanError(r, 2, what);
      expect(r.errorLines[0]).toMatch(message);
      if (r.maxRssBytes !== undefined) expect(r.maxRssBytes).toBeLessThan(MEMORY_BOUND);
    });
  }

  it('a session manifest that is a FIFO: refused, not read', () => {
    const folder = scratch('hostile-session');
    run('mkfifo', [join(folder, 'heaphook-session.1.json')]);
    const r = heaphook(['report', folder]);
    expectCleanError(r, 2, 'report DIR with a FIFO manifest');
    expect(r.errorLines[0]).toMatch(/heaphook-session\.1\.json is a FIFO \(named pipe\)/);
  });
});

describe('report NEW --diff BASE', () => {
  const damaged = scratch('hostile-diff');
  const whole = readFileSync(log);
  const sides: [string, Buffer][] = [
    ['empty', Buffer.alloc(0)],
    ['truncated', whole.subarray(0, whole.length - 10)],
    ['a compression bomb', Buffer.concat([fileHeader(), block(0x80000000, deflateBomb(64))])],
  ];
  for (const [what, bytes] of sides) {
    const path = join(damaged, `${what.replace(/ /g, '-')}.log`);
    writeFileSync(path, bytes);
    it(`a base that is ${what}: exit 3, the base named, no comparison printed`, () => {
      const r = heaphook(['report', log, '--diff', path]);
      expectCleanError(r, 3, `diff, base ${what}`);
      expect(r.errorLines[0]).toMatch(
        /^heaphook report: the base log is damaged, so the runs cannot be compared: /,
      );
      expect(r.errorLines[0]).toContain(path);
      expect(r.stdout).toBe('');
    });
  }

  it('a damaged new log: exit 3, the new side named', () => {
    const r = heaphook(['report', join(damaged, 'truncated.log'), '--diff', log]);
    expectCleanError(r, 3, 'diff, new truncated');
    expect(r.errorLines[0]).toMatch(
      /the new log is damaged, so the runs cannot be compared: .*truncated\.log/,
    );
  });

  it('runs of two different programs are compared with a warning naming both', () => {
    const other = scratch('hostile-other');
    expect(traced(other, '/bin/true', []).status).toBe(0);
    const r = heaphook(['report', logsIn(other)[0]!, '--diff', log]);
    expect(r.status).toBe(0);
    expect(r.errorLines).toHaveLength(1);
    expect(r.errorLines[0]).toMatch(
      /^heaphook report: warning: the runs are of different programs: base \S+\/hostile \(.*\), new \S+\/true \(\/bin\/true\); sites are matched by function names alone$/,
    );
    expect(r.errorLines[0]).not.toMatch(RAW_UNSAFE);
    expect(shared('diff itself').errorLines).toEqual([]);
  });
});

describe('a process id out of range, a descriptor limit', () => {
  it('record -p 2147483648: one line naming the range, nothing started', () => {
    const r = heaphook(['record', '-p', '2147483648']);
    expectCleanError(r, 2, 'record -p 2147483648');
    expect(r.errorLines[0]).toMatch(
      /^heaphook record: -p 2147483648 is not a process id: pids run from 1 to \d+ here \(\/proc\/sys\/kernel\/pid_max\); give the pid of a running process, e.g\. -p 4242/,
    );
  });

  const limited = ['-c', 'ulimit -n 4 && exec "$0" "$@"', workload, 'counts'];
  const warning =
    /^heaphook\[\d+\] error: heaptrack: cannot .*: no file descriptor left \(.*; RLIMIT_NOFILE allows 4 open files\); not tracing\. Raise the limit \(ulimit -n 1024\)$/m;

  it('RLIMIT_NOFILE=4, preloaded: the program runs, the tracer says why it is not tracing', () => {
    const out = scratch('hostile-nofile');
    const r = traced(out, '/bin/sh', limited);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toMatch(warning);
  });

  it('RLIMIT_NOFILE=4 under record: the same line, from the process that could not connect', () => {
    const out = scratch('hostile-nofile-record');
    const r = heaphook(['record', '-q', '-o', out, '--', '/bin/sh', ...limited]);
    expect(r.status).toBe(0);
    expect(r.errorLines.join('\n')).toMatch(warning);
  });
});

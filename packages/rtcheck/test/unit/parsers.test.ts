// The command's parsers on their own: suppression files (RTSan's matching rules) and the
// report file the library writes (native/report.c).
import { describe, expect, it } from 'vitest';

import { parseReport, parseSuppressions, patternRegExp, suppressedBy } from '../../src/index.js';

describe('suppression patterns (sanitizer_common TemplateMatch)', () => {
  it.each([
    ['malloc', 'malloc', true],
    ['alloc', 'malloc', true], // a substring
    ['^alloc', 'malloc', false],
    ['^mal', 'malloc', true],
    ['loc$', 'malloc', true],
    ['^mal*c$', 'malloc', true],
    ['^mal*c$', 'malloc_usable_size', false],
    ['ns::Logger::*', 'ns::Logger::write(char const*)', true],
    ['a.b', 'axb', false], // only * is special
  ])('%s matches %s: %s', (pattern, text, expected) => {
    expect(patternRegExp(pattern).test(text)).toBe(expected);
  });
});

describe('suppression files', () => {
  const rules = parseSuppressions(
    [
      '# comment',
      '',
      'call-stack-contains:log_message',
      'function-name-matches:pthread_mutex_lock',
      '  frame:^Logger::',
      'call:sleep',
      'file:third_party/*',
      'thread:^io$',
    ].join('\n'),
    'test.supp',
  );

  it('reads both formats, comments and blank lines aside', () => {
    expect(rules.map((r) => [r.kind, r.pattern])).toEqual([
      ['stack', 'log_message'],
      ['call', 'pthread_mutex_lock'],
      ['stack', '^Logger::'],
      ['call', 'sleep'],
      ['file', 'third_party/*'],
      ['thread', '^io$'],
    ]);
  });

  it('says which rule suppressed a violation', () => {
    const subject = {
      call: 'malloc',
      thread: 'control',
      functions: ['f', 'log_message'],
      files: [],
    };
    expect(suppressedBy(rules, subject)?.line).toBe('call-stack-contains:log_message');
    expect(suppressedBy(rules, { ...subject, functions: ['f'] })).toBeUndefined();
    expect(suppressedBy(rules, { ...subject, functions: [], thread: 'io' })?.line).toBe(
      'thread:^io$',
    );
    expect(
      suppressedBy(rules, { ...subject, functions: [], files: ['/src/third_party/x.c'] })?.line,
    ).toBe('file:third_party/*');
  });

  it('refuses a line of another kind, naming the file and line', () => {
    expect(() => parseSuppressions('call:x\nrace:y\n', 'my.supp')).toThrow(
      /my\.supp:2: "race:y" is not a suppression/,
    );
  });
});

describe('report files', () => {
  const text = [
    'heaphook-rtcheck\t1\t4240\treport',
    'module\t0\t400000\t401000\t0abc\t/bin/prog',
    'module\t7f0000000000\t7f0000000000\t7f0000100000\t-\t/lib/libc.so.6',
    'thread\t4242\t1\t10\t20\t1\t636f6e74726f6c',
    'violation\tmalloc\t250\t4242\t1\t10\t636f6e74726f6c\t400123,7f0000000456',
    'violation\toperator new\t3\t4243\t0\t0\t-\t',
    'dropped\t0',
    'end',
    '',
  ].join('\n');

  it('gives modules, threads and violations with their names decoded', () => {
    const r = parseReport(text);
    expect(r.pid).toBe(4240);
    expect(r.complete).toBe(true);
    expect(r.modules.map((m) => [m.path, m.start, m.end, m.buildId])).toEqual([
      ['/bin/prog', 0x400000, 0x401000, '0abc'],
      ['/lib/libc.so.6', 0x7f0000000000, 0x7f0000100000, ''],
    ]);
    expect(r.threads).toEqual([
      { tid: 4242, policy: 1, priority: 10, minorFaults: 20, majorFaults: 1, thread: 'control' },
    ]);
    expect(r.violations.map((v) => [v.call, v.count, v.thread, v.pcs])).toEqual([
      ['malloc', 250, 'control', [0x400123, 0x7f0000000456]],
      ['operator new', 3, '', []],
    ]);
  });

  it('a file cut short is marked incomplete; another file is refused', () => {
    expect(parseReport(text.split('end')[0]!).complete).toBe(false);
    expect(() => parseReport('heaplog 3\n')).toThrow(/not a heaphook rtcheck report/);
  });
});

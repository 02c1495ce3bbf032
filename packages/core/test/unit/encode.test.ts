/**
 * The encoders of hostile text (src/encode.ts), one per output format: what each leaves
 * unchanged, what each escapes, and that a GitHub Actions runner reads no command in any
 * line they write.
 */
import { describe, expect, it } from 'vitest';

import {
  displayText,
  githubData,
  githubProperty,
  htmlText,
  jsonText,
  terminalText,
  xmlText,
} from '../../src/index.js';

/** What an Actions runner obeys in a line: `::cmd` after leading blanks, `##[cmd]` anywhere. */
function runnerCommand(line: string): string | undefined {
  const v2 = /^::([\w-]+)[^:]*::/.exec(line.trimStart());
  if (v2 !== null) return v2[1];
  return /##\[([\w-]+)[^\]]*\]/.exec(line)?.[1];
}

const HOSTILE = [
  '::error file=forged.c,line=1::forged',
  '  ::add-mask::secret',
  '\u00a0::stop-commands::token',
  'x##[add-mask]legacy',
  'x##vso[task.setvariable variable=a]1',
  '\u001b]0;title\u0007\u001b[31mred\u001b[0m',
  'evil\nfake_frame\r\n/etc/passwd:1',
  'bidi \u202eevil\u202c and \u2028 separator',
  'C1 \u009b31m and DEL \u007f',
  'lone \ud800 surrogate',
];

describe('displayText (and terminalText, its name for terminal lines)', () => {
  it('leaves ordinary names alone: C++ scopes, UTF-8, paths, blanks', () => {
    for (const s of [
      'std::vector<int>::push_back(int const&)',
      'café_naïve 日本 😀',
      '/usr/lib/x86_64-linux-gnu/libc.so.6',
      'a b\u00a0c',
      '#include <x>',
    ]) {
      expect(displayText(s)).toBe(s);
      expect(terminalText(s)).toBe(s);
    }
  });

  it('shows control characters as \\xNN and other unsafe code points as \\uNNNN', () => {
    expect(displayText('a\u001b[31mb\u0007\n\t\u007f\u009b')).toBe(
      'a\\x1b[31mb\\x07\\x0a\\x09\\x7f\\x9b',
    );
    expect(displayText('\u202eevil\u2066\u2028\ufeff\ud800')).toBe(
      '\\u202eevil\\u2066\\u2028\\ufeff\\ud800',
    );
    expect(displayText('😀')).toBe('😀');
  });

  it('never lets a CI runner read a command, and is the same applied twice', () => {
    expect(displayText('::error::x')).toBe('\\x3a:error::x');
    expect(displayText(' \u00a0::warning::x')).toBe(' \u00a0\\x3a:warning::x');
    expect(displayText('a##[error]b')).toBe('a\\x23#[error]b');
    for (const s of HOSTILE) {
      const shown = displayText(s);
      expect(shown, JSON.stringify(s)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u202e]/);
      expect(runnerCommand(shown), JSON.stringify(s)).toBeUndefined();
      expect(runnerCommand(`      ${shown} [module+0x10]`)).toBeUndefined();
      expect(displayText(shown)).toBe(shown);
    }
  });
});

describe('xmlText and htmlText', () => {
  it('escape the markup characters and leave no character XML 1.0 forbids', () => {
    expect(xmlText(`<a href="x">&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;');
    for (const s of HOSTILE) {
      // XML 1.0 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | supplementary planes
      expect(xmlText(s)).not.toMatch(/[\u0000-\u001f\ud800-\udfff\ufffe\uffff<>"']/);
      expect(htmlText(s)).toBe(xmlText(s));
    }
  });
});

describe('githubData and githubProperty', () => {
  it("escape as the runner unescapes, after displayText: a message stays one line, a property can't end early", () => {
    expect(githubData('100% of 1\n')).toBe('100%25 of 1\\x0a');
    expect(githubProperty('a.c:1, b')).toBe('a.c%3A1%2C b');
    for (const s of HOSTILE) {
      const line = `::error file=${githubProperty(s)},title=${githubProperty(s)}::${githubData(s)}`;
      expect(line.split('\n')).toHaveLength(1);
      expect(runnerCommand(line)).toBe('error');
      const properties = /^::error ([^:]*)::/.exec(line)?.[1];
      expect(properties?.split(',')).toHaveLength(2);
    }
  });
});

describe('jsonText', () => {
  it('is JSON.stringify, read back exactly, with nothing unsafe to show raw', () => {
    const value = { names: HOSTILE, n: 1, nested: [{ s: '##[add-mask]x' }] };
    for (const space of [undefined, 2]) {
      const text = jsonText(value, space);
      expect(JSON.parse(text)).toEqual(value);
      expect(text).not.toMatch(/[\u007f-\u009f\u2028\u2029\u202a-\u202e]/);
      expect(text).not.toContain('##[');
      for (const line of text.split('\n')) expect(runnerCommand(line)).toBeUndefined();
    }
    expect(jsonText({ a: 1 }, 2)).toBe(JSON.stringify({ a: 1 }, null, 2));
  });
});

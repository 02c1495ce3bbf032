/**
 * Suppression files: RealtimeSanitizer's format, so a file written for RTSan works unchanged,
 * plus heaphook's own kinds.
 *
 *   # a comment
 *   call-stack-contains:NAME     (RTSan) a frame of the stack is a function matching NAME
 *   function-name-matches:NAME   (RTSan) the intercepted call (malloc, pthread_mutex_lock ...)
 *   frame:NAME  call:NAME        heaphook's spellings of the two above
 *   file:NAME                    (heaphook) a frame's source file matches NAME
 *   thread:NAME                  (heaphook) the thread's name matches NAME
 *
 * NAME matches as in sanitizer_common: a substring, unless anchored with ^ (start) or $ (end);
 * `*` stands for any run of characters.
 */
import { readFileSync } from 'node:fs';

import { describeFileSystemError, HeaphookError } from '@heaphook/core';

export type SuppressionKind = 'stack' | 'call' | 'file' | 'thread';

export interface Suppression {
  readonly kind: SuppressionKind;
  readonly pattern: string;
  /** The line as written, for the report's list of what matched. */
  readonly line: string;
}

const KINDS: readonly (readonly [string, SuppressionKind])[] = [
  ['call-stack-contains:', 'stack'],
  ['function-name-matches:', 'call'],
  ['frame:', 'stack'],
  ['call:', 'call'],
  ['file:', 'file'],
  ['thread:', 'thread'],
];

/** Parses a suppression file's text; `source` names it in errors. */
export function parseSuppressions(text: string, source: string): Suppression[] {
  const out: Suppression[] = [];
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const kind = KINDS.find(([prefix]) => line.startsWith(prefix));
    const pattern = kind !== undefined ? line.slice(kind[0].length).trim() : '';
    if (kind === undefined || pattern === '') {
      throw new HeaphookError(
        `${source}:${index + 1}: "${line}" is not a suppression; write call-stack-contains:NAME, function-name-matches:NAME (RTSan's), or frame:, call:, file:, thread: (heaphook's), e.g. call-stack-contains:log_message`,
        { namesCommand: true },
      );
    }
    out.push({ kind: kind[1], pattern, line });
  });
  return out;
}

export function readSuppressions(path: string): Suppression[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new HeaphookError(
      `--suppressions ${path}: ${describeFileSystemError(error)}; name a file of lines such as call-stack-contains:NAME`,
      { namesCommand: true },
    );
  }
  return parseSuppressions(text, path);
}

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
}

/** sanitizer_common's TemplateMatch as a regular expression. */
export function patternRegExp(pattern: string): RegExp {
  let body = pattern;
  const start = body.startsWith('^');
  if (start) body = body.slice(1);
  const end = body.endsWith('$');
  if (end) body = body.slice(0, -1);
  const source = body.split('*').map(escapeRegExp).join('.*');
  return new RegExp(`${start ? '^' : ''}${source}${end ? '$' : ''}`, 's');
}

export interface SuppressionSubject {
  readonly call: string;
  readonly thread: string;
  readonly functions: readonly string[];
  readonly files: readonly string[];
}

/** The first suppression that matches, or undefined. */
export function suppressedBy(
  rules: readonly Suppression[],
  subject: SuppressionSubject,
): Suppression | undefined {
  return rules.find((rule) => {
    const re = patternRegExp(rule.pattern);
    switch (rule.kind) {
      case 'call':
        return re.test(subject.call);
      case 'thread':
        return re.test(subject.thread);
      case 'stack':
        return subject.functions.some((f) => re.test(f));
      case 'file':
        return subject.files.some((f) => re.test(f));
    }
  });
}

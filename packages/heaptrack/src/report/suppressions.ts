/**
 * Known leaks, suppressed: `report` and `check` take `--suppressions FILE` and a project's
 * default file (PROJECT_SUPPRESSIONS, looked for in the working directory and its parents).
 *
 * The format is LeakSanitizer's, which KDE heaptrack's `--suppressions` reads too: one
 * `leak:PATTERN` per line, `#` comments and blank lines ignored. A leak is suppressed when any
 * frame of its allocation stack has a function name, source file or module path that PATTERN
 * matches: a substring match where `*` is any run of characters, `^` anchors at the start and
 * `$` at the end (LSan's `TemplateMatch`). Other kinds (`race:`, `called_from_lib:` ...) belong
 * to other sanitizers: they are read and ignored, as LSan does. Suppressed leaks are counted
 * apart (ReportJson.suppressed...), never dropped without a figure.
 */
import { existsSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';

import { HeaphookError } from '@heaphook/core';

import { readSmallFile } from '../decode/input.js';
import type { Frame } from './symbolize.js';

/** The project-level default file's name. */
export const PROJECT_SUPPRESSIONS = '.heaphook-suppressions';

/** The most a suppressions file may hold. */
const SUPPRESSIONS_CAP = 1024 * 1024;

export interface Suppression {
  /** The pattern as written after `leak:`. */
  readonly pattern: string;
  /** The file and line it comes from. */
  readonly from: string;
  readonly test: (text: string) => boolean;
}

/** LSan's TemplateMatch as a regular expression: `*` any run, `^`/`$` anchors, else substring. */
function matcher(pattern: string): (text: string) => boolean {
  const start = pattern.startsWith('^');
  const end = pattern.endsWith('$') && pattern.length > (start ? 1 : 0);
  const body = pattern.slice(start ? 1 : 0, end ? -1 : undefined);
  const source = body
    .split('*')
    .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  const re = new RegExp(`${start ? '^' : ''}${source}${end ? '$' : ''}`);
  return (text) => re.test(text);
}

/** Parses a suppressions file's text; `name` is where it comes from, for errors. */
export function parseSuppressions(text: string, name: string): Suppression[] {
  const out: Suppression[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const colon = line.indexOf(':');
    if (colon <= 0) {
      throw new HeaphookError(
        `${name}:${i + 1}: "${line}" is not a suppression; write leak:FUNCTION_OR_LIBRARY (LSan's format), e.g. leak:libpython3`,
      );
    }
    const kind = line.slice(0, colon).trim();
    const pattern = line.slice(colon + 1).trim();
    if (kind !== 'leak') return; // another sanitizer's kind: ignored, as LSan does
    if (pattern === '') {
      throw new HeaphookError(`${name}:${i + 1}: leak: needs a pattern, e.g. leak:libpython3`);
    }
    out.push({ pattern, from: `${name}:${i + 1}`, test: matcher(pattern) });
  });
  return out;
}

/** The project's default file: the nearest PROJECT_SUPPRESSIONS from dir upwards, if any. */
export function projectSuppressionsFile(dir = process.cwd()): string | undefined {
  for (let d = resolve(dir); ; d = dirname(d)) {
    const file = join(d, PROJECT_SUPPRESSIONS);
    if (existsSync(file)) return file;
    if (dirname(d) === d) return undefined;
  }
}

/**
 * The suppressions `report` and `check` apply: the files given (`--suppressions`, repeatable)
 * and the project's default file unless `project` is false (`--no-default-suppressions`).
 */
export function loadSuppressions(
  files: readonly string[],
  options: { project?: boolean; cwd?: string } = {},
): { suppressions: Suppression[]; files: string[] } {
  const all = [...files];
  if (options.project !== false) {
    const own = projectSuppressionsFile(options.cwd);
    if (own !== undefined && !all.some((f) => resolve(f) === own)) all.push(own);
  }
  const suppressions = all.flatMap((file) =>
    parseSuppressions(
      readSmallFile(file, {
        name: `--suppressions ${file}`,
        wanted: 'give a file of leak:PATTERN lines',
        cap: SUPPRESSIONS_CAP,
      }),
      file,
    ),
  );
  return { suppressions, files: all };
}

/** The suppression that matches a stack's frames, if one does. */
export function suppressionOf(
  frames: readonly Frame[],
  suppressions: readonly Suppression[],
): Suppression | undefined {
  for (const s of suppressions) {
    for (const f of frames) {
      if (
        s.test(f.function) ||
        (f.file !== undefined && s.test(f.file)) ||
        (f.module !== '' && s.test(f.module))
      )
        return s;
    }
  }
  return undefined;
}

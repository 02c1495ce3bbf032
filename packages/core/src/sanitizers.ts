/**
 * The sanitizer tier's runner (part of @heaphook/core/testing): runs a test program built by
 * `heaphook_add_sanitized_program` (cmake/sanitizers.cmake) with options that make any report
 * fatal, and says what the sanitizer reported. A package's test/sanitize tests use it:
 *
 *   const run = runSanitized(join(release, 'my_unit_asan'), []);
 *   expect(run.report).toBe('');   // the sanitizer's first report line(s), '' when none
 *   expect(run.status).toBe(0);
 */
import { existsSync } from 'node:fs';
import { basename } from 'node:path';

import { runProgram, type ProgramRunResult } from './testing.js';

export interface SanitizedRun extends ProgramRunResult {
  /** The sanitizer's report: its headline and first frames, '' when it reported nothing. */
  readonly report: string;
}

/** Options that stop the program at the first report, with a status no test program uses. */
export const sanitizerOptions: Readonly<Record<string, string>> = {
  ASAN_OPTIONS:
    'halt_on_error=1:abort_on_error=0:exitcode=86:detect_leaks=1:strict_string_checks=1',
  UBSAN_OPTIONS: 'halt_on_error=1:print_stacktrace=1:exitcode=86',
  LSAN_OPTIONS: 'exitcode=86',
  TSAN_OPTIONS: 'halt_on_error=1:exitcode=86:second_deadlock_stack=1',
};

const REPORT_START =
  /^(==\d+==ERROR: \w+Sanitizer|WARNING: ThreadSanitizer|.*: runtime error: |==\d+==WARNING: \w+Sanitizer)/;

/** The lines of a sanitizer report in stderr: from its first headline, at most 12 lines. */
export function sanitizerReport(stderr: string): string {
  const lines = stderr.split('\n');
  const first = lines.findIndex((line) => REPORT_START.test(line));
  return first < 0 ? '' : lines.slice(first, first + 12).join('\n');
}

/**
 * Why a sanitized program cannot run here ('' when it can): the build skips the tier when the
 * compiler cannot link a sanitizer's runtime (HEAPHOOK_SANITIZERS=OFF, or no libasan8 /
 * libubsan1 / libtsan2), and the tests then skip with this reason.
 */
export function sanitizedProgramMissing(path: string): string {
  return existsSync(path)
    ? ''
    : `${basename(path)} was not built: the compiler cannot link the sanitizer runtimes ` +
        '(install libasan8 libubsan1 libtsan2, tools/install-system-packages.sh) or ' +
        'HEAPHOOK_SANITIZERS=OFF';
}

/** Runs a sanitized test program in a clean environment with the sanitizer options. */
export function runSanitized(
  program: string,
  args: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
  timeoutMs = 110_000,
): SanitizedRun {
  const run = runProgram(program, args, { env: { ...sanitizerOptions, ...env }, timeoutMs });
  return { ...run, report: sanitizerReport(run.stderr) };
}

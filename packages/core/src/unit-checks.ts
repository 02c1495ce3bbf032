/**
 * What a native unit program printed, read the way every package's unit tier reads it: one line
 * per check (`ok - <name>` or `not ok - <name>: <why>`), then `<N> checks, <F> failed`.
 */

/** A unit program's checks: the lines of those that failed, how many passed, its last line. */
export interface UnitChecks {
  readonly failed: readonly string[];
  readonly passed: number;
  readonly summary: string | undefined;
}

/** Reads a unit program's standard output. */
export function unitChecks(stdout: string): UnitChecks {
  const lines = stdout.trim().split('\n');
  return {
    failed: lines.filter((line) => line.startsWith('not ok')),
    passed: lines.filter((line) => line.startsWith('ok - ')).length,
    summary: lines.at(-1),
  };
}

/** The summary line of a program whose `count` checks all passed. */
export function allChecksPassed(count: number): string {
  return `${count} checks, 0 failed`;
}

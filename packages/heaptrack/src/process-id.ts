/**
 * A process id the user gives (`record -p`, `snapshot PID`): a whole number below the
 * kernel's pid_max, or a HeaphookError naming the option, the range and an example. Checked
 * before anything starts (a pid past the range once reached the collector, which printed its
 * usage text).
 */
import { readFileSync } from 'node:fs';

import { HeaphookError } from '@heaphook/core';

/** The largest pid_max Linux allows on 64-bit machines (PID_MAX_LIMIT, 2^22). */
export const PID_MAX_LIMIT = 4_194_304;

/** This machine's /proc/sys/kernel/pid_max (pids are below it), else PID_MAX_LIMIT. */
function pidMax(): number {
  try {
    const value = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8').trim());
    return Number.isSafeInteger(value) && value > 1 ? value : PID_MAX_LIMIT;
  } catch {
    return PID_MAX_LIMIT;
  }
}

/** `text` as a pid; `given` is how the error names it (`-p 2147483648`). */
export function parseProcessId(text: string, given: string): number {
  const pid = /^\d{1,10}$/.test(text) ? Number(text) : NaN;
  const max = pidMax();
  if (!(pid >= 1 && pid < max)) {
    throw new HeaphookError(
      `${given} is not a process id: pids run from 1 to ${max - 1} here (/proc/sys/kernel/pid_max); give the pid of a running process, e.g. ${given.replace(/\S+$/, '4242')} (ps -e lists them)`,
      { namesCommand: true },
    );
  }
  return pid;
}

/**
 * What a test reads of another process's state through /proc, and a wait for a state the
 * process reaches a moment after the event the test waited for. A thread that has finished its
 * work (a detach's tracer thread, say) still has to be scheduled to leave the kernel's thread
 * list, which on a loaded two-core machine can take milliseconds after the tool that ended it
 * has exited: a test asserts where the state settles, not a snapshot taken in that window.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';

/** The names (comm, at most 15 bytes) of pid's threads, in /proc's order. */
export function threadNames(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) =>
    readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim(),
  );
}

/** Polling period of settledValue: short against the waits it covers, long against a read. */
const SETTLE_POLL_MS = 5;

/**
 * Reads read() until its value deep-equals expected or timeoutMs has passed, and returns the
 * last value read: the test then asserts on it (`expect(await settledValue(...)).toEqual(...)`),
 * so a state that never settles fails with what it was.
 */
export async function settledValue<T>(read: () => T, expected: T, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = read();
    if (isDeepStrictEqual(value, expected) || Date.now() >= deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, SETTLE_POLL_MS));
  }
}

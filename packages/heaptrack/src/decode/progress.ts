/**
 * Progress for long commands (report, recommend, check): shown once a command has run
 * PROGRESS_AFTER_MS; off a terminal as a line every PROGRESS_LINE_MS; percentages never past
 * 100 %. The bar on a terminal is report/progress.ts's.
 */
/** Progress shows once a command has run this long. */
export const PROGRESS_AFTER_MS = 2000;
/** Off a terminal, one line per this long. */
export const PROGRESS_LINE_MS = 5000;

/**
 * Periodic progress lines for a stream that is not a terminal: `prefix: text` after
 * PROGRESS_AFTER_MS, then every PROGRESS_LINE_MS. `percent` is clamped to 0..100. A text that
 * costs something to make can come as a function, called only for the lines written.
 */
export function progressLines(
  prefix: string,
  stream: NodeJS.WritableStream = process.stderr,
): { update(text: string | (() => string)): void } {
  const started = Date.now();
  let last = Number.NEGATIVE_INFINITY; // the first line as soon as PROGRESS_AFTER_MS has passed
  return {
    update(text) {
      const now = Date.now();
      if (now - started < PROGRESS_AFTER_MS || now - last < PROGRESS_LINE_MS) return;
      last = now;
      stream.write(`${prefix}: ${typeof text === 'string' ? text : text()}\n`);
    },
  };
}

/** A whole percentage of done out of total, never past 100 (a total that was an estimate). */
export function percentOf(done: number, total: number): number {
  if (!(total > 0)) return 0;
  return Math.max(0, Math.min(100, Math.floor((done / total) * 100)));
}

// Reads each log given on the command line the ways `heaphook dump`, `report` and `recommend`
// do, in this one process (one start-up for the whole corpus), and prints one JSON line per
// log and reader, then this process's peak RSS. Plain JavaScript over the built package (dist/),
// so that the test can run it under `node --max-old-space-size=256` and measure its memory alone.
//   node test/fuzz/read-logs.mjs <log>...
import { HeaphookError } from '@heaphook/core';

import {
  decodeLogBatches,
  LogFormatError,
  recommend,
  report,
  summarize,
} from '../../dist/index.js';

/** The readers, as the commands use them (dump --summary, dump, report, recommend). */
const readers = {
  'summary-js': (log) => summarize(log, { zstd: 'js' }),
  'summary-program': (log) => summarize(log, { zstd: 'program' }),
  dump: async (log) => {
    for await (const batch of decodeLogBatches(log)) void batch;
  },
  report: async (log) => {
    const r = await report(log, { symbolize: false, progress: false });
    if (r.error !== undefined) throw r.error;
  },
  recommend: (log) => recommend(log),
};

for (const log of process.argv.slice(2)) {
  for (const [reader, read] of Object.entries(readers)) {
    let line = { log, reader, outcome: 'ok' };
    try {
      await read(log);
    } catch (error) {
      // A clean error is one the CLI prints as one line with a documented exit status.
      const clean = error instanceof LogFormatError || error instanceof HeaphookError;
      line = {
        log,
        reader,
        outcome: clean ? 'error' : 'crash',
        message: clean ? error.message : String(error?.stack ?? error),
      };
    }
    process.stdout.write(`${JSON.stringify(line)}\n`);
  }
}
process.stdout.write(`${JSON.stringify({ maxRssBytes: process.resourceUsage().maxRSS * 1024 })}\n`);

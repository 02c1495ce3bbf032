/**
 * One timed decode + summary of a heaplog, in a process of its own so that its peak RSS is
 * measured alone (the report-throughput benchmark runs it through hh-run):
 *   node dist/reportthroughput-child.js <heaplog>
 * prints {"events":..,"decode_ms":..,"peak_bytes":..,"leaked_blocks":..}.
 */
import { summarize } from '@heaphook/heaptrack';

const log = process.argv[2];
if (log === undefined) {
  process.stderr.write('usage: reportthroughput-child <heaplog>\n');
  process.exit(2);
}
const t0 = performance.now();
const s = await summarize(log);
const ms = performance.now() - t0;
process.stdout.write(
  `${JSON.stringify({ events: s.events, decode_ms: ms, peak_bytes: s.peakBytes, leaked_blocks: s.leaks.length })}\n`,
);

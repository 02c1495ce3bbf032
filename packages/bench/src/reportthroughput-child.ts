/**
 * One timed pass of the report over a heaplog (decode + every figure of the report model:
 * `buildReportModel`, its events replayed by heaplog_addon.node), in a process of its own so
 * that its peak RSS is measured alone (the report-throughput benchmark runs it through hh-run):
 *   node dist/reportthroughput-child.js <heaplog>
 * prints {"events":..,"decode_ms":..,"peak_bytes":..,"leaked_blocks":..}.
 */
import { buildReportModel } from '@heaphook/heaptrack';

const log = process.argv[2];
if (log === undefined || process.argv.length > 3) {
  process.stderr.write('usage: reportthroughput-child <heaplog>\n');
  process.exit(2);
}
const t0 = performance.now();
const { model, error } = await buildReportModel(log, { progress: false });
const ms = performance.now() - t0;
if (error !== undefined) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
process.stdout.write(
  `${JSON.stringify({ events: model.events, decode_ms: ms, peak_bytes: model.peakHeapBytes, leaked_blocks: model.leaks.leakedBlocks })}\n`,
);

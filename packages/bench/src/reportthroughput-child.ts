/**
 * One timed pass of the report over a heaplog (decode + every figure of the report model:
 * `buildReportModel`, the native pass when heaplog_addon.node is built), in a process of its own
 * so that its peak RSS is measured alone (the report-throughput benchmark runs it through
 * hh-run):
 *   node dist/reportthroughput-child.js <heaplog> [native|js]
 * prints {"events":..,"decode_ms":..,"peak_bytes":..,"leaked_blocks":..,"engine":..}.
 */
import { buildReportModel } from '@heaphook/heaptrack';

const log = process.argv[2];
const engine = process.argv[3];
if (log === undefined || (engine !== undefined && engine !== 'native' && engine !== 'js')) {
  process.stderr.write('usage: reportthroughput-child <heaplog> [native|js]\n');
  process.exit(2);
}
const t0 = performance.now();
const { model, error } = await buildReportModel(log, {
  progress: false,
  ...(engine !== undefined ? { engine } : {}),
});
const ms = performance.now() - t0;
if (error !== undefined) {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
}
process.stdout.write(
  `${JSON.stringify({ events: model.events, decode_ms: ms, peak_bytes: model.peakHeapBytes, leaked_blocks: model.leaks.leakedBlocks, engine: engine ?? 'default' })}\n`,
);

/**
 * @heaphook/heaptrack — the heap tracer's log decoder, symboliser and recorder.
 *
 *   import { record, summarize, decodeLog } from '@heaphook/heaptrack';
 *   const { logs } = await record('python3', ['-c', 'print(1)']);
 *   for await (const r of decodeLog(logs[0].path)) if (r.type === 'event') ...
 *   // the fast form, a block at a time by typed-array columns (no object per event):
 *   for await (const b of decodeLogColumns(logs[0].path)) total += b.events.length;
 */
export { LogFormatError, type DecodeOptions } from './decode/decoder.js';
export {
  decodeLog,
  decodeLogBatches,
  decodeLogColumns,
  eventAt,
  recordsOf,
  type ColumnDecodeOptions,
} from './decode/events.js';
export type { EventBatch, EventColumns } from './decode/columns.js';
export { attach, detach, type AttachedLog, type AttachOptions } from './record/attach.js';
export {
  attachRunning,
  parseDuration,
  processesNamed,
  type AttachRunningOptions,
  type RunningRecording,
} from './record/running.js';
export { dump, formatEvent, formatVm, type DumpOptions } from './report/dump.js';
export {
  collectorPath,
  memoryEventsLibrary,
  record,
  tracerLibraryPath,
  type RecordedLog,
  type RecordOptions,
  type RecordResult,
} from './record/record.js';
export * from './decode/records.js';
export {
  framesOf,
  summarize,
  type LeakCheckSummary,
  type LeakSite,
  type LiveBlock,
  type Summary,
  type SummaryOptions,
} from './report/summary.js';
export { readBuildId } from './report/elf.js';
export {
  MappedMemory,
  RangeSet,
  type MappedMemorySummary,
  type MappingSite,
} from './report/vmmap.js';
export * from './recommend/index.js';
export * from './report/index.js';
export {
  formatFrame,
  symbolFileFor,
  Symbolizer,
  type Frame,
  type SymbolizerOptions,
} from './report/symbolize.js';

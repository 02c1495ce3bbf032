/**
 * @heaphook/bench — the comparative benchmark driver, usable from code as well as from
 * `nx run bench:compare` / `nx run bench:micro`.
 */
export { compare, type CompareOptions, type CompareOutcome } from './compare.js';
export { micro, type MicroOptions, type MicroResult } from './micro.js';
export {
  BUILTIN_VARIANTS,
  discoverAllocators,
  parseCustom,
  parseVariant,
  SYSTEM_ALLOCATORS,
  type BackendLike,
  type DiscoverOptions,
  type VariantDef,
} from './allocators.js';
export { selectWorkloads, WORKLOADS, type WorkloadDef } from './workloads.js';
export { buildSchedule } from './schedule.js';
export { bestAllocator, checkChecksums, median, stat, summarize } from './stats.js';
export { classifyRun, lastJsonLine, runOne } from './launcher.js';
export { SCHEMA_ID, validateResults, type Results } from './results.js';
export { markdownReport, terminalReport } from './report.js';
export { renderSvg } from './chart.js';
export type * from './types.js';

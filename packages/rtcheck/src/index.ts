/**
 * @heaphook/rtcheck — catch every allocation and blocking call of a real-time thread, by
 * preload, over any backend.
 *
 *   import { rtcheck } from '@heaphook/rtcheck';
 *   const { analysis, status } = await rtcheck('./control_loop', [], { backend: 'tlsf' });
 */
export {
  analyze,
  type Analysis,
  type PageFaults,
  type SuppressedViolation,
  type Violation,
  type ViolationFrame,
} from './analyze.js';
export { analysisJson, formatAnalysis } from './format.js';
export { schedPolicyName as policyName } from '@heaphook/core';
export { parseReport, type RawReport, type RawThread, type RawViolation } from './report-file.js';
export {
  checkAfter,
  rtcheck,
  rtcheckStatus,
  type RtcheckOptions,
  type RtcheckResult,
} from './run.js';
export {
  parseSuppressions,
  patternRegExp,
  readSuppressions,
  suppressedBy,
  type Suppression,
  type SuppressionKind,
} from './suppressions.js';

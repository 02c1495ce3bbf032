/** @heaphook/agent: the service behind `heaphook agent`, for embedding and tests. */
export { startAgent, type AgentOptions, type RunningAgent } from './agent/server.js';
export {
  Registry,
  ProcessProfile,
  DEFAULT_LIMITS,
  sampleWeight,
  type AgentLimits,
} from './agent/store.js';
export {
  decodeFrame,
  FrameReader,
  FrameError,
  MAX_FRAME_BYTES,
  type Frame,
} from './agent/frames.js';
export { renderMetrics } from './agent/metrics.js';
export { buildProfile, encodeProfile } from './agent/pprof.js';
export { parseHttpAddress, parseGroup, DEFAULT_HTTP } from './agent/command.js';

export { agentLibraryPath } from './library.js';
export {
  attachToAgent,
  agentAddress,
  type AttachOptions,
  type AttachOutcome,
} from './attach/command.js';

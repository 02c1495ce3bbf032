/**
 * `heaphook recommend`: the TLSF pool size a recorded program needs, from a replay of its log
 * through the real TLSF code (see search.ts and replay.ts).
 */
export {
  formatRecommendation,
  launchPython,
  launchXml,
  recommendationJson,
  runCommand,
  shellQuote,
} from './format.js';
export { footprint, requestOf, type Request } from './replay.js';
export { recommend, type Recommendation, type RecommendOptions } from './search.js';

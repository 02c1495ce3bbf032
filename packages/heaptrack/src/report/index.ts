/** `heaphook report`: the report model, its renderers and the driver. */
export { report, buildReportModel, type ReportOptions, type ReportResult } from './run.js';
export {
  ReportBuilder,
  topSites,
  ALLOCATION_OPS,
  type ReportModel,
  type SiteStats,
} from './model.js';
export {
  leakVerdict,
  totalsBySite,
  type LeakCheck,
  type LeakedBlock,
  type LeakSiteTotal,
  type LeakVerdict,
} from './leaks.js';
export { HeapSeries, type SeriesPoint } from './series.js';
export { LatencyHistogram, SizeHistogram, type Percentiles } from './histogram.js';
export {
  chartGeometry,
  heapChartSvg,
  svgToPdf,
  svgToPng,
  FONT_FILE,
  FONT_FAMILY,
  type ChartGeometry,
  type HeapChartInput,
  type MappedChartInput,
} from './chart.js';
export { flameGraphSvg, type FlameInput, type FlameOptions } from './flamegraph.js';
export { pprofBytes, pprofProfile } from './pprof.js';
export { reportHtml, type HtmlParts } from './html.js';
export { FrameTable, pageRun, type PageData, type PageRun } from './page/data.js';
export { diffReportFiles } from './diff-html.js';
export {
  reportJson,
  type ReportJson,
  type JsonSite,
  type JsonLeakSite,
  type JsonMappedMemory,
} from './json.js';
export { reportText } from './text.js';
export { StackNames } from './symbols.js';
export { EXIT_DAMAGED_LOG } from './command.js';

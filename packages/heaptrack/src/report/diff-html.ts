/**
 * `heaphook report NEW --diff BASE -o DIR`: the new run's report page (report.html and the
 * other files of -o) with the comparison beside it: the diff's totals and sites, and a
 * differential flame graph of every mode (widths the new run's, colours the change against
 * the base). The base log is replayed once more for its stacks and figures per site.
 */
import { diffReports, type ReportDiff } from './diff.js';
import { pageRun } from './page/data.js';
import { buildReportModel, report, type ReportResult } from './run.js';
import { StackNames } from './symbols.js';

export async function diffReportFiles(
  basePath: string,
  newPath: string,
  options: { outputDir: string; symbolize?: boolean; top?: number; skipFrames?: readonly RegExp[] },
): Promise<{ diff: ReportDiff; result: ReportResult }> {
  const symbolize = options.symbolize !== false;
  const diff = await diffReports(basePath, newPath, options);
  const { model: base } = await buildReportModel(basePath, { progress: false });
  const stacks = new Set([
    ...base.sites.map((s) => s.stack),
    ...base.leaks.sites.map((s) => s.stack),
  ]);
  const names = await StackNames.of(base, stacks, { symbolize });
  const result = await report(newPath, {
    outputDir: options.outputDir,
    symbolize,
    ...(options.top !== undefined ? { top: options.top } : {}),
    compare: { diff, run: (frames) => pageRun(`base: ${basePath}`, base, names, frames) },
  });
  return { diff, result };
}

/**
 * The libraries the interactive page inlines, read from their npm packages when a page is
 * written: d3 7 (ISC) and d3-flame-graph 5 (Apache-2.0), both UMD builds that define the
 * globals `d3` and `flamegraph`. The page loads nothing else: it works offline from file://.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

let cached: string | undefined;

/** The libraries' code, as one script (any `</script` in it escaped). */
export function pageLibraries(): string {
  if (cached === undefined) {
    // Their exports name other builds; the minified UMD files sit beside them in dist/.
    const d3 = readFileSync(join(dirname(require.resolve('d3')), 'd3.min.js'), 'utf8');
    const flame = readFileSync(
      join(dirname(require.resolve('d3-flame-graph')), 'd3-flamegraph.umd.min.js'),
      'utf8',
    );
    cached = `${d3}\n;${flame}\n`.replace(/<\/script/gi, '<\\/script');
  }
  return cached;
}

// Cost of attach(): a node loop of Buffer.alloc(65536) (zero-filled: calloc) timed untraced and
// attached, in separate processes, interleaved (README "Attaching to a running Node process").
//   node packages/heaptrack/scripts/attach-cost.cjs [runs] [buffers]   (after npx nx build heaptrack)
// Prints the median of the runs for each mode, in ms, and the attached log's size.
'use strict';
const { spawnSync } = require('node:child_process');
const { mkdtempSync, rmSync, statSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const [mode, count] = process.argv.slice(2);
if (mode === 'untraced' || mode === 'attached') {
  const n = Number(count);
  const { attach, detach } = require('..');
  const loop = () => {
    let keep = [];
    for (let i = 0; i < n; i++) {
      const b = Buffer.alloc(65536);
      if (i % 2 === 0) keep.push(b);
      if (keep.length === 500) keep = [];
    }
  };
  loop(); // warm-up: the JIT, and the heap's size
  const where = process.env.ATTACH_COST_DIR;
  if (mode === 'attached') attach({ outputDir: where });
  const t0 = process.hrtime.bigint();
  loop();
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  const log = mode === 'attached' ? detach().path : null;
  console.log(JSON.stringify({ ms, log }));
} else {
  const runs = Number(process.argv[2] ?? 5);
  const n = Number(process.argv[3] ?? 20000);
  const dir = mkdtempSync(join(tmpdir(), 'attach-cost-'));
  const times = { untraced: [], attached: [] };
  let bytes = 0;
  for (let r = 0; r < runs; r++) {
    for (const m of ['untraced', 'attached']) {
      const p = spawnSync(process.execPath, [__filename, m, String(n)], {
        encoding: 'utf8',
        env: { ...process.env, ATTACH_COST_DIR: dir },
      });
      if (p.status !== 0) throw new Error(p.stderr);
      const out = JSON.parse(p.stdout);
      times[m].push(out.ms);
      if (out.log) bytes = statSync(out.log).size;
    }
  }
  rmSync(dir, { recursive: true, force: true });
  const median = (a) => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
  console.log(
    `${n} x Buffer.alloc(65536), median of ${runs}: untraced ${median(times.untraced).toFixed(0)} ms, ` +
      `attached ${median(times.attached).toFixed(0)} ms (${(median(times.attached) / median(times.untraced)).toFixed(2)}x); ` +
      `log ${(bytes / 1048576).toFixed(1)} MiB`,
  );
  console.log(JSON.stringify(times));
}

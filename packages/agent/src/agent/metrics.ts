/**
 * /metrics: one series per process, labelled pid, comm and backend, in the Prometheus text
 * format (0.0.4) or, when the scraper asks for it, OpenMetrics 1.0.
 */
import type { ProcessProfile, Registry } from './store.js';

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';
export const OPENMETRICS_CONTENT_TYPE =
  'application/openmetrics-text; version=1.0.0; charset=utf-8';

type Kind = 'gauge' | 'counter';
interface Family {
  readonly name: string; /* counters: without _total */
  readonly kind: Kind;
  readonly help: string;
  readonly samples: { labels: string; value: number }[];
}

/** A label value as the text formats quote it. */
export function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

function labelsOf(p: ProcessProfile, extra = ''): string {
  const base = `pid="${p.pid}",comm="${escapeLabel(p.comm)}",backend="${escapeLabel(p.backend)}"`;
  return `{${base}${extra}}`;
}

function families(registry: Registry, residentBytes: number): Family[] {
  const f = (name: string, kind: Kind, help: string): Family => ({ name, kind, help, samples: [] });
  const live = f(
    'heaphook_heap_live_bytes',
    'gauge',
    'Bytes in live heap blocks: source="sampled" estimates from the samples, source="exact" is the backend\'s count',
  );
  const peak = f(
    'heaphook_heap_peak_bytes',
    'gauge',
    'Highest live heap bytes seen since the process connected (source as for heaphook_heap_live_bytes)',
  );
  const allocs = f('heaphook_allocations', 'counter', 'Allocation calls since the process started');
  const frees = f('heaphook_frees', 'counter', 'Free calls since the process started');
  const samples = f('heaphook_samples', 'counter', 'Sampled allocations delivered to an agent');
  const dropped = f(
    'heaphook_dropped_samples',
    'counter',
    'Samples lost: the agent gone, slow, or over its limits',
  );
  const reconnects = f('heaphook_agent_reconnects', 'counter', 'Times the process connected again');
  const liveSamples = f(
    'heaphook_live_samples',
    'gauge',
    'Sampled blocks still live, as the agent holds them',
  );
  const mapped = f(
    'heaphook_mapped_bytes',
    'gauge',
    'Bytes in blocks the backend mapped individually',
  );
  const pool = f(
    'heaphook_pool_size_bytes',
    'gauge',
    "Bytes in the backend's pool (TLSF: every area)",
  );
  const poolFree = f('heaphook_pool_free_bytes', 'gauge', "Free bytes inside the backend's pool");
  const largestFree = f(
    'heaphook_pool_largest_free_block_bytes',
    'gauge',
    'The largest block a request could get now',
  );
  const growths = f('heaphook_pool_growths', 'counter', 'Times the pool grew after start-up');
  const largestRequest = f('heaphook_largest_request_bytes', 'gauge', 'The largest size asked for');
  const sampleBytes = f('heaphook_sample_interval_bytes', 'gauge', 'Mean bytes between samples');
  const vmMapped = f(
    'heaphook_vm_mapped_bytes',
    'counter',
    "Bytes the process mapped since it began reporting (ucm-hooks' VM_MAPPED events)",
  );
  const vmUnmapped = f(
    'heaphook_vm_unmapped_bytes',
    'counter',
    "Bytes the process unmapped since it began reporting (ucm-hooks' VM_UNMAPPED events)",
  );
  const leakChecks = f('heaphook_leak_checks', 'counter', "heaptrack's leak checks made so far");
  const leakedBlocks = f(
    'heaphook_leaked_blocks',
    'gauge',
    'Blocks the last leak check found unreachable',
  );
  const leakedBytes = f('heaphook_leaked_bytes', 'gauge', 'Bytes in those blocks');
  for (const p of registry.processes()) {
    const st = p.stats;
    const b = p.backendStats;
    live.samples.push({ labels: labelsOf(p, ',source="sampled"'), value: p.liveSampledBytes });
    peak.samples.push({ labels: labelsOf(p, ',source="sampled"'), value: p.peakSampledBytes });
    liveSamples.samples.push({ labels: labelsOf(p), value: p.liveSamples });
    sampleBytes.samples.push({ labels: labelsOf(p), value: p.sampleBytes });
    if (st !== undefined) {
      allocs.samples.push({ labels: labelsOf(p), value: st.allocsTotal });
      frees.samples.push({ labels: labelsOf(p), value: st.freesTotal });
      samples.samples.push({ labels: labelsOf(p), value: st.samplesTotal });
      dropped.samples.push({
        labels: labelsOf(p),
        value: st.droppedSamplesTotal + p.droppedByAgent,
      });
      reconnects.samples.push({ labels: labelsOf(p), value: st.reconnectsTotal });
      if (st.vm !== undefined) {
        vmMapped.samples.push({ labels: labelsOf(p), value: st.vm.mappedBytesTotal });
        vmUnmapped.samples.push({ labels: labelsOf(p), value: st.vm.unmappedBytesTotal });
      }
      if (st.leaks !== undefined) {
        leakChecks.samples.push({ labels: labelsOf(p), value: st.leaks.checksTotal });
        leakedBlocks.samples.push({ labels: labelsOf(p), value: st.leaks.leakedBlocks });
        leakedBytes.samples.push({ labels: labelsOf(p), value: st.leaks.leakedBytes });
      }
    }
    if (b !== undefined) {
      live.samples.push({ labels: labelsOf(p, ',source="exact"'), value: b.usedBytes });
      peak.samples.push({
        labels: labelsOf(p, ',source="exact"'),
        value: Math.max(b.peakUsedBytes, p.peakExactBytes),
      });
      mapped.samples.push({ labels: labelsOf(p), value: b.mmappedBytes });
      pool.samples.push({ labels: labelsOf(p), value: b.poolBytes });
      poolFree.samples.push({ labels: labelsOf(p), value: b.freeBytes });
      largestFree.samples.push({ labels: labelsOf(p), value: b.largestFreeBlock });
      growths.samples.push({ labels: labelsOf(p), value: b.growthCount });
      largestRequest.samples.push({ labels: labelsOf(p), value: b.largestRequest });
    }
  }
  const agentProcesses = f('heaphook_agent_processes', 'gauge', 'Processes connected to the agent');
  agentProcesses.samples.push({ labels: '', value: registry.processes().length });
  const protocolErrors = f(
    'heaphook_agent_protocol_errors',
    'counter',
    'Connections closed for a frame that broke the layout',
  );
  protocolErrors.samples.push({ labels: '', value: registry.protocolErrors });
  const rejected = f(
    'heaphook_agent_rejected_connections',
    'counter',
    "Connections refused: another user's process, or too many processes",
  );
  rejected.samples.push({ labels: '', value: registry.rejectedConnections });
  const resident = f('heaphook_agent_resident_bytes', 'gauge', "The agent's own resident memory");
  resident.samples.push({ labels: '', value: residentBytes });
  return [
    live,
    peak,
    allocs,
    frees,
    samples,
    dropped,
    reconnects,
    liveSamples,
    mapped,
    pool,
    poolFree,
    largestFree,
    growths,
    largestRequest,
    sampleBytes,
    vmMapped,
    vmUnmapped,
    leakChecks,
    leakedBlocks,
    leakedBytes,
    agentProcesses,
    protocolErrors,
    rejected,
    resident,
  ];
}

function number(value: number): string {
  return Number.isFinite(value) ? String(Math.round(value)) : 'NaN';
}

/** The metrics page; openMetrics picks the OpenMetrics 1.0 text over Prometheus 0.0.4. */
export function renderMetrics(
  registry: Registry,
  openMetrics: boolean,
  residentBytes: number,
): string {
  const lines: string[] = [];
  for (const family of families(registry, residentBytes)) {
    const name = family.kind === 'counter' && !openMetrics ? `${family.name}_total` : family.name;
    lines.push(`# HELP ${name} ${family.help}`);
    lines.push(`# TYPE ${name} ${family.kind}`);
    const sampleName = family.kind === 'counter' ? `${family.name}_total` : family.name;
    for (const s of family.samples) lines.push(`${sampleName}${s.labels} ${number(s.value)}`);
  }
  if (openMetrics) lines.push('# EOF');
  return `${lines.join('\n')}\n`;
}

/** Whether an Accept header asks for OpenMetrics (as Prometheus does when it supports it). */
export function wantsOpenMetrics(accept: string | undefined): boolean {
  return accept !== undefined && accept.includes('application/openmetrics-text');
}

/**
 * What the agent keeps per process: the sampled blocks still live, the in-use and cumulative
 * profile by stack, the names of return addresses, and the last counters the process sent.
 * Everything is bounded (AgentLimits): a process that sends more live samples, stacks or
 * symbols than its share gets the excess dropped and counted, never the agent's memory grown.
 */
import { Symbolizer, type ModuleRecord } from '@heaphook/heaptrack';

import type { AllocFrame, BackendStats, HelloFrame, StatsFrame, SymbolFrame } from './frames.js';
import { readModules } from './modules.js';

/** /proc/PID/maps is read again for an address outside every known module at most this often. */
const MAPS_REFRESH_MS = 2000;

export interface AgentLimits {
  /** Processes connected at once; connections beyond are refused. */
  readonly maxProcesses: number;
  /** Sampled blocks still live, per process (the client's own table holds 262,144). */
  readonly maxLiveSamples: number;
  /** Distinct stacks per process; allocations from further stacks count under "[other]". */
  readonly maxStacks: number;
  /** Named return addresses per process. */
  readonly maxSymbols: number;
  /** Profiles of processes that ended, kept for /debug/pprof until newer ones replace them. */
  readonly keptExited: number;
}

export const DEFAULT_LIMITS: AgentLimits = {
  maxProcesses: 1024,
  maxLiveSamples: 262_144,
  maxStacks: 16_384,
  maxSymbols: 65_536,
  keptExited: 16,
};

export interface StackEntry {
  readonly pcs: readonly bigint[];
  allocObjects: number;
  allocSpace: number;
  inuseObjects: number;
  inuseSpace: number;
}

interface LiveSample {
  readonly stack: StackEntry;
  readonly objects: number;
  readonly bytes: number;
}

export interface FunctionName {
  readonly name: string;
  readonly module: string;
}

const OTHER_STACK = 'other';

/** The weight of a sample of `size` bytes at a mean interval of `mean` bytes (sampler.c). */
export function sampleWeight(size: number, mean: number): number {
  if (mean <= 1 || size <= 0) return 1;
  const probability = -Math.expm1(-size / mean);
  return probability > 0 ? 1 / probability : 1;
}

export class ProcessProfile {
  readonly stacks = new Map<string, StackEntry>();
  readonly symbols = new Map<bigint, FunctionName>();
  private readonly live = new Map<bigint, LiveSample>();
  stats: StatsFrame | undefined;
  liveSampledBytes = 0;
  peakSampledBytes = 0;
  peakExactBytes = 0;
  /** Samples the agent itself could not keep (its limits). */
  droppedByAgent = 0;
  connected = true;
  readonly startedAt = Date.now();
  /** The process's modules (/proc/PID/maps) and the Symbolizer over them (its names cached). */
  modules: ModuleRecord[] = [];
  symbolizer: Symbolizer | undefined;
  private mapsReadAt = 0;

  constructor(
    readonly pid: number,
    readonly uid: number,
    readonly hello: HelloFrame,
    private readonly limits: AgentLimits,
  ) {}

  get comm(): string {
    return this.hello.comm;
  }
  get backend(): string {
    return this.hello.backend;
  }
  get sampleBytes(): number {
    return this.hello.sampleBytes;
  }
  get liveSamples(): number {
    return this.live.size;
  }

  private stackOf(pcs: readonly bigint[]): StackEntry {
    const key = pcs.map((pc) => pc.toString(16)).join(',');
    let entry = this.stacks.get(key);
    if (entry !== undefined) return entry;
    if (this.stacks.size >= this.limits.maxStacks) {
      entry = this.stacks.get(OTHER_STACK);
      if (entry !== undefined) return entry;
      entry = { pcs: [], allocObjects: 0, allocSpace: 0, inuseObjects: 0, inuseSpace: 0 };
      this.stacks.set(OTHER_STACK, entry);
      return entry;
    }
    entry = { pcs, allocObjects: 0, allocSpace: 0, inuseObjects: 0, inuseSpace: 0 };
    this.stacks.set(key, entry);
    return entry;
  }

  /** Reads /proc/PID/maps (again, when a new module may have been loaded). */
  refreshModules(now = Date.now()): void {
    if (!this.connected || now - this.mapsReadAt < MAPS_REFRESH_MS) return;
    this.mapsReadAt = now;
    const modules = readModules(this.pid);
    if (modules.length === 0) return;
    this.modules = modules;
    this.symbolizer = new Symbolizer(modules);
  }

  private covered(pc: bigint): boolean {
    const n = Number(pc);
    return this.modules.some((m) => n >= m.start && n < m.end);
  }

  alloc(frame: AllocFrame): void {
    if (frame.pcs.length > 0 && !this.covered(frame.pcs[0]!)) this.refreshModules();
    if (this.live.size >= this.limits.maxLiveSamples && !this.live.has(frame.address)) {
      this.droppedByAgent++;
      return;
    }
    this.free(frame.address); /* a FREE that was dropped: the address is reused now */
    const weight = sampleWeight(frame.size, this.sampleBytes);
    const stack = this.stackOf(frame.pcs);
    const sample = { stack, objects: weight, bytes: weight * frame.size };
    stack.allocObjects += sample.objects;
    stack.allocSpace += sample.bytes;
    stack.inuseObjects += sample.objects;
    stack.inuseSpace += sample.bytes;
    this.live.set(frame.address, sample);
    this.liveSampledBytes += sample.bytes;
    if (this.liveSampledBytes > this.peakSampledBytes)
      this.peakSampledBytes = this.liveSampledBytes;
  }

  /** A block sampled before this connection (an agent restart) is unknown: nothing to do. */
  free(address: bigint): void {
    const sample = this.live.get(address);
    if (sample === undefined) return;
    this.live.delete(address);
    sample.stack.inuseObjects -= sample.objects;
    sample.stack.inuseSpace -= sample.bytes;
    this.liveSampledBytes -= sample.bytes;
    if (this.live.size === 0) this.liveSampledBytes = 0; /* no float drift when empty */
  }

  symbol(frame: SymbolFrame): void {
    if (this.symbols.size >= this.limits.maxSymbols && !this.symbols.has(frame.pc)) return;
    this.symbols.set(frame.pc, { name: frame.name, module: frame.module });
  }

  updateStats(frame: StatsFrame): void {
    this.stats = frame;
    const used = frame.backend?.usedBytes;
    if (used !== undefined && used > this.peakExactBytes) this.peakExactBytes = used;
  }

  /** The backend's figures, when it keeps them. */
  get backendStats(): BackendStats | undefined {
    return this.stats?.backend;
  }
}

/** Every process the agent knows: connected ones and the last few that ended. */
export class Registry {
  private readonly connected = new Set<ProcessProfile>();
  private readonly exited: ProcessProfile[] = [];
  rejectedConnections = 0;
  protocolErrors = 0;

  constructor(readonly limits: AgentLimits = DEFAULT_LIMITS) {}

  get full(): boolean {
    return this.connected.size >= this.limits.maxProcesses;
  }

  open(pid: number, uid: number, hello: HelloFrame): ProcessProfile {
    const profile = new ProcessProfile(pid, uid, hello, this.limits);
    profile.refreshModules();
    this.connected.add(profile);
    return profile;
  }

  close(profile: ProcessProfile): void {
    if (!this.connected.delete(profile)) return;
    profile.connected = false;
    this.exited.push(profile);
    while (this.exited.length > this.limits.keptExited) this.exited.shift();
  }

  /** Connected processes, oldest connection first. */
  processes(): ProcessProfile[] {
    return [...this.connected];
  }

  /** The newest profile of pid: connected first, then the ended ones. */
  find(pid: number): ProcessProfile | undefined {
    let found: ProcessProfile | undefined;
    for (const p of this.connected) if (p.pid === pid) found = p;
    if (found !== undefined) return found;
    for (const p of this.exited) if (p.pid === pid) found = p;
    return found;
  }

  all(): ProcessProfile[] {
    return [...this.connected, ...this.exited];
  }
}

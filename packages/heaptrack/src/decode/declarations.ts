/**
 * The records that are not events (PROCESS, MODULE, THREAD, NODE, END, LEAK, LEAK_CHECK, VM_*,
 * RT_VIOLATION): decoded here, in TypeScript, from the decl stream, when the C decoder of events
 * (native/analyze/, which every reader of events goes through: replay.ts) stops at one
 * (FORMAT.md, "Records"). What they declare (the log's flags and time unit, the threads) is
 * handed back to the scanner by its caller.
 */
import {
  END_REASON_NAMES,
  LEAK_TRIGGER_NAMES,
  MAX_THREAD_INDEX,
  PF_ATTACHED,
  PF_DROP,
  PF_FORK_CHILD,
  PF_FREE_STACKS,
  PF_SAMPLING,
  PF_STACKS,
  PF_TIMING,
  PF_VM,
  RT_VIOLATION_FIELDS,
  TAG_END,
  TAG_LEAK,
  TAG_LEAK_CHECK,
  TAG_MODULE,
  TAG_NODE,
  TAG_PROCESS,
  TAG_RT_VIOLATION,
  TAG_THREAD,
  TAG_VM_MAPPED,
  TAG_VM_UNMAPPED,
} from './format.generated.js';
import type { LogRecord, ModuleRecord, ProcessRecord } from './records.js';
import type { Streams } from './streams.js';

/**
 * What the declarations of a log say, as far as the next ones need it: the flags and time unit
 * (PROCESS), the threads (persist), and the NODE records' delta state (restarts every block).
 */
export class DeclarationState {
  flags = 0;
  unit = 1; // ns per time tick
  readonly threads = new Map<number, number>(); // index -> tid
  pc = 0;
  node = 0; // id of the previous NODE record in the block

  startBlock(): void {
    this.pc = 0;
    this.node = 0;
  }
}

/** Decodes one record that is not an event (a declaration) from the streams. */
export function decodeRecord(cs: Streams, s: DeclarationState, out: LogRecord[]): void {
  const tag = cs.tag.u8();
  const c = cs.decl;
  switch (tag) {
    case TAG_PROCESS: {
      const pid = c.varint();
      const ppid = c.varint();
      const monotonicStartNs = c.varint();
      const realtime = c.varint();
      const flags = c.varint();
      const stackDepth = c.varint();
      const sampleBytes = c.varint();
      const timeUnit = c.varint();
      const tracerVersion = c.string();
      const exe = c.string();
      const cmdline = c.string();
      s.flags = flags;
      s.unit = timeUnit > 0 ? timeUnit : 1;
      const process: ProcessRecord = {
        type: 'process',
        pid,
        ppid,
        monotonicStartNs,
        startTimeMs: Math.round(realtime / 1e6),
        stacks: (flags & PF_STACKS) !== 0,
        timing: (flags & PF_TIMING) !== 0,
        sampling: (flags & PF_SAMPLING) !== 0,
        dropWhenFull: (flags & PF_DROP) !== 0,
        freeStacks: (flags & PF_FREE_STACKS) !== 0,
        forkChild: (flags & PF_FORK_CHILD) !== 0,
        vmEvents: (flags & PF_VM) !== 0,
        attached: (flags & PF_ATTACHED) !== 0,
        stackDepth,
        sampleBytes,
        timeUnitNs: s.unit,
        tracerVersion,
        exe,
        argv: cmdline.split('\0').filter((a, i, all) => i < all.length - 1 || a !== ''),
      };
      out.push(process);
      return;
    }
    case TAG_MODULE: {
      const base = c.varint();
      const lo = c.varint();
      const hi = c.varint();
      const buildId = c.bytes().toString('hex');
      const path = c.string();
      const module: ModuleRecord = {
        type: 'module',
        base,
        start: base + lo,
        end: base + hi,
        buildId,
        path,
      };
      out.push(module);
      return;
    }
    case TAG_THREAD: {
      const index = c.varint();
      if (index > MAX_THREAD_INDEX) {
        throw new RangeError(`thread index ${index} out of range (at most ${MAX_THREAD_INDEX})`);
      }
      const tid = c.varint();
      s.threads.set(index, tid);
      out.push({ type: 'thread', index, tid });
      return;
    }
    case TAG_NODE: {
      const id = s.node + 1 + c.svarint();
      const parent = id - c.varint();
      s.pc += c.svarint();
      s.node = id;
      out.push({ type: 'stack', id, parent, pc: s.pc });
      return;
    }
    case TAG_END: {
      const reasonCode = c.varint();
      const dropped = c.varint();
      const time = c.varint() * s.unit;
      const events = c.varint();
      out.push({
        type: 'end',
        reason: END_REASON_NAMES[reasonCode] ?? 'unknown',
        dropped,
        time,
        events,
      });
      return;
    }
    case TAG_LEAK: {
      const check = c.varint();
      const ptr = c.varint();
      const size = c.varint();
      out.push({ type: 'leak', check, ptr, size });
      return;
    }
    case TAG_VM_MAPPED:
    case TAG_VM_UNMAPPED: {
      const time = c.varint() * s.unit;
      const thread = c.varint();
      const stack = c.varint();
      const address = c.varint();
      const size = c.varint();
      const tid = s.threads.get(thread);
      if (tid === undefined)
        throw new RangeError(`memory event of undeclared thread index ${thread}`);
      out.push({
        type: 'vm',
        kind: tag === TAG_VM_MAPPED ? 'mapped' : 'unmapped',
        time,
        tid,
        stack,
        address,
        size,
      });
      return;
    }
    case TAG_RT_VIOLATION: {
      // The fields as native/format/fields.h's HH_RT_VIOLATION_FIELDS lists them.
      const var_: Record<string, number> = {};
      const str: Record<string, string> = {};
      for (const field of RT_VIOLATION_FIELDS) {
        if (field.coding === 'str') str[field.name] = c.string();
        else var_[field.name] = c.varint();
      }
      const thread = var_.thread!;
      const tid = s.threads.get(thread);
      if (tid === undefined)
        throw new RangeError(`real-time violation of undeclared thread index ${thread}`);
      out.push({
        type: 'rt_violation',
        time: var_.time! * s.unit,
        tid,
        stack: var_.stack!,
        site: var_.site!,
        call: str.call!,
        threadName: str.thread_name!,
        policy: var_.policy!,
        priority: var_.priority!,
        count: var_.count!,
      });
      return;
    }
    case TAG_LEAK_CHECK: {
      const check = c.varint();
      const time = c.varint();
      const triggerCode = c.varint();
      const liveBlocks = c.varint();
      const leakedBlocks = c.varint();
      const leakedBytes = c.varint();
      const reachableBlocks = c.varint();
      const reachableBytes = c.varint();
      const durationNs = c.varint();
      const trigger = LEAK_TRIGGER_NAMES[triggerCode];
      if (trigger === undefined) throw new RangeError(`unknown leak check trigger ${triggerCode}`);
      out.push({
        type: 'leak_check',
        check,
        time,
        trigger,
        liveBlocks,
        leakedBlocks,
        leakedBytes,
        reachableBlocks,
        reachableBytes,
        durationNs,
      });
      return;
    }
    default:
      throw new RangeError(`unknown record tag 0x${tag.toString(16).padStart(2, '0')}`);
  }
}

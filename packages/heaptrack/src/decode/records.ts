/** The records of a heaplog, as the decoder yields them (FORMAT.md describes the bytes). */

import { OP_NAMES } from './format.generated.js';

/** Allocation-family functions, in the order of their operation codes (enum hh_op of heaplog.h). */
export const OPS = OP_NAMES;
export type Op = (typeof OPS)[number];

export interface ProcessRecord {
  readonly type: 'process';
  readonly pid: number;
  readonly ppid: number;
  /** CLOCK_MONOTONIC at start-up, ns; event times are relative to it. */
  readonly monotonicStartNs: number;
  /** CLOCK_REALTIME at start-up, ms since the epoch. */
  readonly startTimeMs: number;
  readonly stacks: boolean;
  readonly timing: boolean;
  readonly sampling: boolean;
  readonly dropWhenFull: boolean;
  readonly freeStacks: boolean;
  /** The process was created by fork() of a traced parent. */
  readonly forkChild: boolean;
  /** Mapped-memory events are recorded (ucm-hooks was loaded; VmRecord). */
  readonly vmEvents: boolean;
  /** Tracing began in a running process (heaphook_heaptrack_attach*, `heaphook record -p`). */
  readonly attached: boolean;
  readonly stackDepth: number;
  /** HEAPHOOK_SAMPLE_BYTES, 0 when every call is recorded. */
  readonly sampleBytes: number;
  /** Resolution of event times, ns (HEAPHOOK_TIME_RESOLUTION; default 100000 = 0.1 ms). */
  readonly timeUnitNs: number;
  readonly tracerVersion: string;
  readonly exe: string;
  readonly argv: readonly string[];
}

export interface ModuleRecord {
  readonly type: 'module';
  /** Load bias: add it to an ELF virtual address to get the address in the process. */
  readonly base: number;
  /** Absolute address range of the module's PT_LOAD segments. */
  readonly start: number;
  readonly end: number;
  /** GNU build id, hex; '' when the module has none. */
  readonly buildId: string;
  readonly path: string;
}

export interface ThreadRecord {
  readonly type: 'thread';
  readonly index: number;
  readonly tid: number;
}

/** A node of the stack trie: the frame `pc` called from the stack `parent` (0 = outermost). */
export interface StackNodeRecord {
  readonly type: 'stack';
  readonly id: number;
  readonly parent: number;
  /** Return address (the instruction after the call). */
  readonly pc: number;
}

export interface EventRecord {
  readonly type: 'event';
  readonly op: Op;
  /** ns since the process started (ProcessRecord.monotonicStartNs). */
  readonly time: number;
  readonly tid: number;
  /** Stack node of the innermost frame; 0 when no stack was recorded. */
  readonly stack: number;
  /** The block returned (0 = failure), or the block freed. */
  readonly ptr: number;
  /** realloc/reallocarray: the block passed in. */
  readonly oldPtr: number;
  /** Bytes asked for; the element size for calloc and reallocarray. */
  readonly size: number;
  /** calloc/reallocarray: number of elements (else 1). */
  readonly count: number;
  /** Alignment asked for (posix_memalign, memalign, aligned_alloc), else 0. */
  readonly align: number;
  /** ns in the underlying allocator (HEAPHOOK_TIMING=1), else undefined. */
  readonly duration: number | undefined;
  /** Sampling: bytes this record stands for; 0 = this realloc's new block was not sampled.
   * Undefined when the log is not sampled. */
  readonly weight: number | undefined;
  /** realloc moved the block: the new block exists from this thread's next realloc_done. */
  readonly split: boolean;
}

export interface EndRecord {
  readonly type: 'end';
  readonly reason:
    'exit' | 'lost' | 'collector' | 'detach' | 'write_error' | 'protocol' | 'unknown';
  /** Records dropped with HEAPHOOK_ON_FULL=drop. */
  readonly dropped: number;
  readonly time: number;
  readonly events: number;
}

/**
 * A leak check's verdict on one block it found unreachable (issue 8; FORMAT.md tag LEAK).
 * The check's LeakCheckRecord follows its LEAK records. The block's size and allocation stack
 * are those of the event that allocated `ptr`.
 */
export interface LeakRecord {
  readonly type: 'leak';
  /** The check it belongs to (1, 2, ... in the order the checks ran). */
  readonly check: number;
  readonly ptr: number;
  /** Bytes of the block as the tracer knew it at the check. */
  readonly size: number;
}

/** The end of one leak check: what it scanned and found (FORMAT.md tag LEAK_CHECK). */
export interface LeakCheckRecord {
  readonly type: 'leak_check';
  readonly check: number;
  /** ns since the process started, when the check began. */
  readonly time: number;
  /** What started it: the process exiting, HEAPHOOK_LEAK_SIGNAL, or the API. */
  readonly trigger: 'exit' | 'signal' | 'api';
  /** Live blocks when the world was stopped. */
  readonly liveBlocks: number;
  readonly leakedBlocks: number;
  readonly leakedBytes: number;
  readonly reachableBlocks: number;
  readonly reachableBytes: number;
  /** How long the world was stopped, ns. */
  readonly durationNs: number;
}

/**
 * Memory the program mapped or unmapped (format version 2, tags VM_MAPPED / VM_UNMAPPED):
 * ucm-hooks' VM_MAPPED after mmap, mremap, shmat or a growing brk made memory exist, and
 * VM_UNMAPPED before munmap, mremap, shmdt, a shrinking brk, mmap MAP_FIXED over a range, or
 * madvise DONTNEED / FREE / REMOVE made it go away.
 */
export interface VmRecord {
  readonly type: 'vm';
  readonly kind: 'mapped' | 'unmapped';
  /** ns since the process started. */
  readonly time: number;
  readonly tid: number;
  /** Stack node of the call that mapped or unmapped (0 = none recorded). */
  readonly stack: number;
  readonly address: number;
  /** Bytes (whole pages). */
  readonly size: number;
}

/**
 * A call a real-time thread must not make, as rtcheck's guard reported it (format version 3, tag
 * RT_VIOLATION; `heaphook record -b rtcheck`). One per (call, call site, thread) at its first
 * call, with the stack, and again at exit with the final count: the record of a `site` with
 * the largest count is the one to read.
 */
export interface RtViolationRecord {
  readonly type: 'rt_violation';
  /** ns since the process started. */
  readonly time: number;
  readonly tid: number;
  /** Stack node of the violating call (0 = none recorded). */
  readonly stack: number;
  /** The guard's number of the (call, call site, thread): 1, 2, ... */
  readonly site: number;
  /** The call: `malloc`, `operator new`, `pthread_mutex_lock`, ... */
  readonly call: string;
  /** The thread's name (comm). */
  readonly threadName: string;
  /** The thread's scheduling policy (SCHED_OTHER 0, SCHED_FIFO 1, SCHED_RR 2, SCHED_DEADLINE 6). */
  readonly policy: number;
  readonly priority: number;
  /** Calls so far. */
  readonly count: number;
}

export type LogRecord =
  | ProcessRecord
  | ModuleRecord
  | ThreadRecord
  | StackNodeRecord
  | EventRecord
  | EndRecord
  | LeakRecord
  | LeakCheckRecord
  | VmRecord
  | RtViolationRecord;

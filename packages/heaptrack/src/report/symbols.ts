/** Stacks of a report resolved to frames, once for all (addr2line through Symbolizer). */
import { displayText } from '@heaphook/core';

import { framesOf } from './summary.js';
import { type Frame, Symbolizer } from './symbolize.js';
import type { ReportModel } from './model.js';
import { SiteNamer, TRUNCATED_FRAME } from './sites.js';

/** The root frame of a stack cut at HEAPHOOK_STACK_DEPTH: its outermost frame is no caller. */
const TRUNCATED: Frame = {
  pc: 0,
  function: TRUNCATED_FRAME,
  module: '',
  offset: 0,
  inlined: false,
};

export interface StackNamesOptions {
  /** Resolve with addr2line (default true); false keeps raw addresses. */
  readonly symbolize?: boolean;
  /** More frames to name sites past (`--skip-frames`), beside the built-in allocator list. */
  readonly skipFrames?: readonly RegExp[];
}

export class StackNames {
  private resolved = new Map<number, Frame[]>();
  /** Names sites by their first frame outside the allocators (sites.ts). */
  readonly namer: SiteNamer;

  private constructor(
    private readonly model: ReportModel,
    skipFrames: readonly RegExp[] = [],
  ) {
    this.namer = new SiteNamer(skipFrames);
  }

  /** Symbolises every frame of the given stacks. `symbolize: false` keeps raw addresses. */
  static async of(
    model: ReportModel,
    stacks: Iterable<number>,
    options: StackNamesOptions = {},
  ): Promise<StackNames> {
    const names = new StackNames(model, options.skipFrames);
    const pcs = new Set<number>();
    for (const id of stacks) for (const pc of framesOf(model.stacks, id)) pcs.add(pc);
    if (options.symbolize !== false && pcs.size > 0) {
      names.resolved = await new Symbolizer(model.modules).symbolize(pcs);
    }
    return names;
  }

  /** Return addresses of a stack, innermost first. */
  pcs(stack: number): number[] {
    return stack === 0 ? [] : framesOf(this.model.stacks, stack);
  }

  /** Frames of one return address (inlined functions first); a placeholder when unresolved. */
  framesOfPc(pc: number): Frame[] {
    const frames = this.resolved.get(pc);
    if (frames !== undefined && frames.length > 0) return frames;
    const module = this.model.modules.findLast((m) => pc >= m.start && pc < m.end);
    return [
      {
        pc,
        function: module
          ? `${basename(module.path)}+0x${(pc - 1 - module.base).toString(16)}`
          : `0x${pc.toString(16)}`,
        module: module?.path ?? '',
        offset: module ? pc - 1 - module.base : pc,
        inlined: false,
      },
    ];
  }

  /**
   * Every frame of a stack, innermost first, inlined frames expanded (each once: an inlined
   * frame and the frame it was inlined into that name the same function are one), and a
   * `[truncated]` root frame when the stack was cut at HEAPHOOK_STACK_DEPTH.
   */
  frames(stack: number): Frame[] {
    const pcs = this.pcs(stack);
    const out: Frame[] = [];
    for (const f of pcs.flatMap((pc) => this.framesOfPc(pc))) {
      const last = out[out.length - 1];
      if (last !== undefined && last.function === f.function && f.function !== '??') {
        if (last.inlined || f.inlined) {
          out[out.length - 1] = { ...last, inlined: last.inlined && f.inlined };
          continue;
        }
      }
      out.push(f);
    }
    if (this.truncated(pcs.length)) out.push(TRUNCATED);
    return out;
  }

  /** A stack of this many frames was cut: the tracer stops unwinding at HEAPHOOK_STACK_DEPTH. */
  truncated(depth: number): boolean {
    const limit = this.model.process?.stackDepth ?? 0;
    return limit > 0 && depth >= limit;
  }

  /** The index in frames(stack) of the frame the site is named by (SiteNamer.siteIndex). */
  siteIndex(stack: number): number {
    return this.namer.siteIndex(this.frames(stack));
  }

  /**
   * Function names of a stack for display (displayText), innermost first; ['(no stack
   * recorded)'] when none was recorded.
   */
  functions(stack: number): string[] {
    const names = this.frames(stack).map((f) =>
      displayText(f.function === '??' ? placeholder(f) : f.function),
    );
    return names.length > 0 ? names : ['(no stack recorded)'];
  }
}

function basename(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

function placeholder(f: Frame): string {
  return f.module !== ''
    ? `${basename(f.module)}+0x${f.offset.toString(16)}`
    : `0x${f.pc.toString(16)}`;
}

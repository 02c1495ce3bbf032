/** Stacks of a report resolved to frames, once for all (addr2line through Symbolizer). */
import { displayText } from '@heaphook/core';

import { framesOf } from './summary.js';
import { type Frame, Symbolizer } from './symbolize.js';
import type { ReportModel } from './model.js';

export class StackNames {
  private resolved = new Map<number, Frame[]>();

  private constructor(private readonly model: ReportModel) {}

  /** Symbolises every frame of the given stacks. `symbolize: false` keeps raw addresses. */
  static async of(
    model: ReportModel,
    stacks: Iterable<number>,
    options: { symbolize?: boolean } = {},
  ): Promise<StackNames> {
    const names = new StackNames(model);
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

  /** Every frame of a stack, innermost first, inlined frames expanded. */
  frames(stack: number): Frame[] {
    return this.pcs(stack).flatMap((pc) => this.framesOfPc(pc));
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

/**
 * report.html's own script (src/report/page/script.ts) reads a timeline cell, and a leaked-block
 * cell, by the names of its columns (TIMELINE_COLUMNS, LEAKED_COLUMNS), never by position: so
 * adding or moving a column cannot silently shift what the page draws over a brushed range.
 */
import { describe, expect, it } from 'vitest';

import { TIMELINE_COLUMNS } from '../../src/decode/replay.js';
import { LEAKED_COLUMNS } from '../../src/report/page/data.js';
import { PAGE_SCRIPT } from '../../src/report/page/script.js';

/** The names the script binds the page data's `run.timeline.<field>` array to. */
function arraysOf(field: 'cells' | 'leaked'): string[] {
  const names = [...PAGE_SCRIPT.matchAll(new RegExp(`(\\w+) = run\\.timeline\\.${field}\\b`, 'g'))];
  return names.map((m) => m[1]!);
}

/** Every index expression the script applies to an array named `name`. */
function indexesOf(name: string): string[] {
  return [...PAGE_SCRIPT.matchAll(new RegExp(`\\b${name}\\[([^\\]]*)\\]`, 'g'))].map((m) =>
    m[1]!.trim(),
  );
}

/** An index that is a position: a number, a bare cursor (the cell's first column) or a cursor
 * plus a number. */
const POSITIONAL = /^(\d+|\w+|\w+\s*\+\s*\d+)$/;

describe("report.html's script", () => {
  for (const field of ['cells', 'leaked'] as const) {
    it(`reads the timeline's ${field} by column name only`, () => {
      const arrays = arraysOf(field);
      expect(arrays, `the script reads run.timeline.${field}`).not.toHaveLength(0);
      for (const array of arrays) {
        const indexes = indexesOf(array);
        expect(indexes, `${array}[...] in the script`).not.toHaveLength(0);
        for (const index of indexes) expect(index, `${array}[${index}]`).not.toMatch(POSITIONAL);
      }
    });
  }

  it('names only columns that exist, with the offsets of their lists', () => {
    const offsets = (columns: readonly string[]) =>
      JSON.stringify(Object.fromEntries(columns.map((name, offset) => [name, offset])));
    expect(PAGE_SCRIPT).toContain(`var CELL = ${offsets(TIMELINE_COLUMNS)};`);
    expect(PAGE_SCRIPT).toContain(`var LEAKED = ${offsets(LEAKED_COLUMNS)};`);
    const named = (table: string) =>
      [...PAGE_SCRIPT.matchAll(new RegExp(`\\b${table}\\.(\\w+)`, 'g'))].map((m) => m[1]!);
    expect(named('CELL')).not.toHaveLength(0);
    for (const column of named('CELL')) expect(TIMELINE_COLUMNS).toContain(column);
    for (const column of named('LEAKED')) expect(LEAKED_COLUMNS).toContain(column);
  });

  it('sums for each mode over a range a column of the timeline', () => {
    const table = /var RANGE_COLUMN = (\{[^}]*\});/.exec(PAGE_SCRIPT);
    expect(table).not.toBeNull();
    const rangeColumn = JSON.parse(table![1]!) as Record<string, string>;
    const modes = [...PAGE_SCRIPT.matchAll(/^ {4}(\w+): \{ label: /gm)].map((m) => m[1]!);
    expect(Object.keys(rangeColumn).sort()).toEqual([...modes].sort());
    for (const column of Object.values(rangeColumn)) expect(TIMELINE_COLUMNS).toContain(column);
  });
});

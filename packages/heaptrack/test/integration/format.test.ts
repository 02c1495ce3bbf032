/**
 * The contract of "one format": native/format/heaplog.h defines every constant of the heaplog
 * format once; the TypeScript decoder uses the constants scripts/gen-format.mjs generates from it
 * (src/decode/format.generated.ts), and nothing else defines them again; FORMAT.md names every
 * tag, flag and limit with the header's values. Changing one side without the others fails here.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { EVENT_COMMON_COLUMNS } from '../../src/decode/columns.js';
import * as format from '../../src/decode/format.generated.js';
import { newScanner } from '../../src/decode/replay.js';
import { OPS } from '../../src/decode/records.js';
import { packageDir } from '../helpers.js';

const headerPath = join(packageDir, 'native/format/heaplog.h');
const header = readFileSync(headerPath, 'utf8');
const formatMd = readFileSync(join(packageDir, 'FORMAT.md'), 'utf8');
/** FORMAT.md's prose with its line breaks as spaces. */
const formatText = formatMd.replace(/\s+/g, ' ');
const generatedPath = join(packageDir, 'src/decode/format.generated.ts');

/** The generated constants of heaplog.h (those of native/format/fields.h are FIELD_* and OPS_*
 * and the two tables of fields). */
const isFieldsConstant = (key: string) => key.startsWith('FIELD_') || key.startsWith('OPS_');
const entries: [string, unknown][] = Object.entries(format).filter(
  ([key]) => !isFieldsConstant(key) && key !== 'EVENT_FIELDS' && key !== 'RT_VIOLATION_FIELDS',
);
const constants = entries.filter(
  (e): e is [string, number | string] => typeof e[1] === 'number' || typeof e[1] === 'string',
);
const nameLists = entries.filter((e): e is [string, readonly string[]] => Array.isArray(e[1]));

/** The names heaplog.h defines (#define HH_X value, enum members HH_X = value). */
function headerNames(source: string): string[] {
  const text = source.replace(/\/\*[^]*?\*\//g, '').replace(/\/\/.*$/gm, '');
  const defines = [...text.matchAll(/^#define (HH_\w+) \S/gm)].map((m) => m[1]!);
  const members = [...text.matchAll(/\b(HH_\w+)\s*=/g)].map((m) => m[1]!);
  return [...defines, ...members];
}

/** Every file below `dir` whose name ends with one of `exts`. */
function filesUnder(dir: string, exts: string[]): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => exts.some((e) => f.endsWith(e)))
    .map((f) => join(dir, f));
}

/** For a list of names (OP_NAMES), the prefix P of the constants P + NAME whose values are 0, 1, ... */
function listPrefix(names: readonly string[]): string | undefined {
  const first = `_${names[0]!.toUpperCase()}`;
  const candidates = constants
    .map(([key]) => key)
    .filter((key) => key.endsWith(first))
    .map((key) => key.slice(0, key.length - first.length + 1));
  return candidates.find((p) =>
    names.every((n, i) => (format as Record<string, unknown>)[p + n.toUpperCase()] === i),
  );
}

/** Compiles a program that includes native/format/<header> and runs `lines` in its main. */
function runC(header: string, lines: string[]) {
  const dir = mkdtempSync(join(tmpdir(), 'heaplog-format-'));
  const source = join(dir, 'values.c');
  writeFileSync(
    source,
    `#include <stdio.h>\n#include "format/${header}"\nint main(void) {\n${lines.join('\n')}\nreturn 0;\n}\n`,
  );
  const cc = spawnSync(
    'cc',
    [
      '-std=c11',
      '-Wall',
      '-Werror',
      '-I',
      join(packageDir, 'native'),
      source,
      '-o',
      join(dir, 'values'),
    ],
    { encoding: 'utf8' },
  );
  expect(cc.stderr).toBe('');
  expect(cc.status).toBe(0);
  return spawnSync(join(dir, 'values'), { encoding: 'utf8' });
}

describe('heaplog.h is the one definition of the format', () => {
  it('format.generated.ts is what scripts/gen-format.mjs makes of heaplog.h now', () => {
    const run = spawnSync(process.execPath, ['scripts/gen-format.mjs', '--stdout'], {
      cwd: packageDir,
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(readFileSync(generatedPath, 'utf8')).toBe(run.stdout);
  });

  it('every definition of heaplog.h reaches the TypeScript', () => {
    const names = headerNames(header).filter((n) => n !== 'HH_HEAPLOG_H');
    expect(names.length).toBeGreaterThan(60);
    const generated = new Set(constants.map(([key]) => `HH_${key}`));
    expect(names.filter((n) => !generated.has(n))).toEqual([]);
    expect(constants.length).toBe(names.length);
  });

  it('the TypeScript values are those the C compiler reads from heaplog.h', () => {
    const lines = constants.map(([key, value]) =>
      typeof value === 'number'
        ? `printf("${key}=%lld\\n", (long long)(HH_${key}));`
        : value.length === 1
          ? `printf("${key}=%c\\n", (char)(HH_${key}));`
          : `printf("${key}=%s\\n", HH_${key});`,
    );
    const expected = constants.map(([key, value]) => `${key}=${value}`);
    // The name lists: member i of OP_NAMES is HH_OP_<NAME> = i in C as well.
    for (const [listName, names] of nameLists) {
      const prefix = listPrefix(names);
      expect(prefix, `${listName}: no constants P<NAME> = 0, 1, ... for its names`).toBeDefined();
      names.forEach((n, i) => {
        const key = `${prefix}${n.toUpperCase()}`;
        lines.push(`printf("${key}=%lld\\n", (long long)(HH_${key}));`);
        expected.push(`${key}=${i}`);
      });
    }
    const run = runC('heaplog.h', lines);
    expect(run.stdout.trimEnd().split('\n')).toEqual(expected);
  });

  it('the decoder takes its tables from the generated constants', () => {
    expect(OPS).toBe(format.OP_NAMES);
    expect(format.STREAM_NAMES.length).toBe(format.STREAM_COUNT);
    expect(format.OP_NAMES.length).toBe(format.OP_COUNT);
  });

  it('no other C file defines a name of heaplog.h again', () => {
    const names = new Set(headerNames(header));
    const again: string[] = [];
    for (const file of filesUnder(join(packageDir, 'native'), ['.c', '.h'])) {
      if (file === headerPath) continue;
      for (const n of headerNames(readFileSync(file, 'utf8')))
        if (names.has(n)) again.push(`${file}: ${n}`);
      if (/typedef struct hh_hello\b/.test(readFileSync(file, 'utf8')))
        again.push(`${file}: hh_hello`);
    }
    expect(again).toEqual([]);
  });

  it('no other TypeScript file defines a generated constant again', () => {
    const names = new Set([...constants, ...nameLists].map(([key]) => key));
    const again: string[] = [];
    for (const file of filesUnder(join(packageDir, 'src'), ['.ts'])) {
      if (file === generatedPath) continue;
      for (const m of readFileSync(file, 'utf8').matchAll(/\bconst (\w+)\s*[:=]/g))
        if (names.has(m[1]!)) again.push(`${file}: ${m[1]}`);
    }
    expect(again).toEqual([]);
  });
});

describe('fields.h is the one table of the fields of events', () => {
  const fieldsConstants = Object.entries(format as Record<string, unknown>).filter(
    (e): e is [string, number] => isFieldsConstant(e[0]) && typeof e[1] === 'number',
  );

  it('every field has its FIELD_*_OPS and _FLAG, with the values the C compiler gives', () => {
    expect(fieldsConstants).toHaveLength(2 * format.EVENT_FIELDS.length + 3);
    const lines = [
      '#define PRINT(name, coding, ops, flag) printf("%s %s %u %u\\n", #name, #coding, (unsigned)(ops), (unsigned)(flag));',
      'HH_EVENT_FIELDS(PRINT)',
      'printf("OPS_ALIGNED %u\\nOPS_ENDING %u\\nOPS_BEGINNING %u\\n", HH_OPS_ALIGNED, HH_OPS_ENDING, HH_OPS_BEGINNING);',
    ];
    const run = runC('fields.h', lines);
    expect(run.stdout.trimEnd().split('\n')).toEqual([
      ...format.EVENT_FIELDS.map((f) => `${f.name} ${f.coding.toUpperCase()} ${f.ops} ${f.flag}`),
      `OPS_ALIGNED ${format.OPS_ALIGNED}`,
      `OPS_ENDING ${format.OPS_ENDING}`,
      `OPS_BEGINNING ${format.OPS_BEGINNING}`,
    ]);
    for (const f of format.EVENT_FIELDS) {
      const upper = f.name.toUpperCase();
      expect((format as Record<string, unknown>)[`FIELD_${upper}_OPS`]).toBe(f.ops);
      expect((format as Record<string, unknown>)[`FIELD_${upper}_FLAG`]).toBe(f.flag);
    }
  });

  it('the one decoder of events hands every field of the table over under its name', () => {
    // native/analyze/'s columns, made by the addon from HH_EVENT_COMMON_COLUMNS and the table
    const columns = newScanner(2, 1).eventColumns(4);
    const { length, ...named } = columns;
    expect(length).toBe(0);
    expect(Object.keys(named)).toEqual([
      ...EVENT_COMMON_COLUMNS,
      ...format.EVENT_FIELDS.map((f) => f.name),
    ]);
    for (const name of EVENT_COMMON_COLUMNS.slice(0, 2))
      expect(named[name]).toBeInstanceOf(Uint8Array);
    for (const f of format.EVENT_FIELDS) expect(named[f.name]).toBeInstanceOf(Float64Array);
    // and no TypeScript decodes events: the decoder's folder has no reader of the addr stream
    const sources = readdirSync(join(packageDir, 'src/decode')).filter(
      (f) => f.endsWith('.ts') && f !== 'format.generated.ts',
    );
    for (const file of sources)
      expect(readFileSync(join(packageDir, 'src/decode', file), 'utf8'), file).not.toMatch(
        /\.addr\b|FIELD_\w+_OPS/,
      );
  });

  it("FORMAT.md's table of operations gives each its fields from the table", () => {
    format.OP_NAMES.forEach((name, op) => {
      const carried = format.EVENT_FIELDS.filter((f) => f.flag === 0 && ((f.ops >> op) & 1) === 1);
      const fields = carried.map((f) => (f.coding === 'new' ? 'new' : f.name)).join(', ');
      const row = new RegExp(`^\\| ${op} +\\| ${name} +\\| ([^|]*?) +\\|`, 'm').exec(formatMd);
      expect(row?.[1]?.replace(/\([^)]*\)/g, ''), name).toBe(fields);
    });
  });

  it('no C file but the codec names an operation to say which fields it carries', () => {
    // the writer's encoder and the C decoder walk HH_EVENT_FIELDS: neither switches on operations
    for (const file of ['native/track/writer.c', 'native/analyze/decode.c'].map((f) =>
      join(packageDir, f),
    )) {
      let text: string;
      try {
        text = readFileSync(file, 'utf8');
      } catch {
        continue;
      }
      expect(text, file).not.toMatch(
        /case HH_OP_(CALLOC|REALLOCARRAY|POSIX_MEMALIGN|MEMALIGN|ALIGNED_ALLOC)\b/,
      );
      expect(text, file).toMatch(/HH_EVENT_FIELDS\(/);
    }
  });
});

describe('FORMAT.md states the values of heaplog.h', () => {
  const hex = (v: number) => `0x${v.toString(16).padStart(2, '0')}`;
  const thousands = (v: number) => v.toLocaleString('en-US');
  /** The FORMAT.md table row of a record field. */
  const row = (field: string) =>
    formatMd.split('\n').find((l) => l.startsWith(`| ${field} `)) ?? '';

  it('points at heaplog.h as the source of the constants', () => {
    expect(formatText).toContain('native/format/heaplog.h');
  });

  it('names the file header: magic and version', () => {
    expect(formatText).toContain(`magic \`${format.LOG_MAGIC}\``);
    expect(formatText).toContain(`format version: ${format.FORMAT_VERSION}`);
    expect(formatText).toContain(`## File header (${format.FILE_HEADER_SIZE} bytes)`);
  });

  it('gives every record tag its value in a heading', () => {
    const headings = formatMd.split('\n').filter((l) => l.startsWith('### '));
    const tags = constants.filter(([key]) => key.startsWith('TAG_') && key !== 'TAG_EVENT');
    expect(tags.length).toBe(10);
    for (const [key, value] of tags) {
      const name = key.slice('TAG_'.length);
      expect(
        headings.some((h) => h.includes(`\`${hex(value as number)}\` ${name}`)),
        `a heading "\`${hex(value as number)}\` ${name}"`,
      ).toBe(true);
    }
    expect(headings.some((h) => h.includes(`\`${hex(format.TAG_EVENT)} | op | flags\``))).toBe(
      true,
    );
  });

  it("gives RT_VIOLATION's fields in the order of fields.h's HH_RT_VIOLATION_FIELDS", () => {
    const section = formatMd.split('### `0x0a` RT_VIOLATION')[1]!.split('\n### ')[0]!;
    const names = [...section.matchAll(/^\| (\w+) +\| (varint|string) +\|/gm)].map((m) => [
      m[1],
      m[2] === 'string' ? 'str' : 'var',
    ]);
    expect(names).toEqual(format.RT_VIOLATION_FIELDS.map((f) => [f.name, f.coding]));
  });

  it('gives the event tag bits and the operations', () => {
    for (const bit of [format.EVT_THREAD, format.EVT_STACK, format.EVT_SPLIT])
      expect(formatText).toContain(`${Math.log2(bit)} (\`${hex(bit)}\`)`);
    expect(formatText).toContain(`Tag bits: 0-${Math.log2(format.EVT_OP_MASK + 1) - 1} operation`);
    format.OP_NAMES.forEach((name, op) =>
      expect(formatMd).toMatch(new RegExp(`^\\| ${op} +\\| ${name} +\\|`, 'm')),
    );
  });

  it('gives the block framing and the size limits', () => {
    expect(formatText).toContain(
      `bit ${Math.log2(format.BLOCK_DEFLATED)} set: the payload is compressed with raw DEFLATE`,
    );
    expect(formatText).toContain(`bit ${Math.log2(format.BLOCK_ZSTD)} set: the payload is zstd`);
    expect(formatText).toContain(
      `bits 0-${Math.log2(format.BLOCK_LENGTH + 1) - 1} the stored payload size`,
    );
    expect(formatText).toContain(`at most **${thousands(format.MAX_BLOCK_PAYLOAD)} bytes**`);
    expect(formatText).toContain(`1 to ${thousands(format.MAX_BLOCK_STORED)} compressed`);
    expect(formatText).toContain(`window of at most ${format.MAX_ZSTD_WINDOW / 1024 / 1024} MiB`);
    expect(formatText).toContain(`at most ${thousands(format.MAX_THREAD_INDEX)};`);
    expect(formatText).toContain(`at most ${format.MAX_VARINT_BYTES} bytes`);
    expect(formatText).toContain(
      `\`exe\` holds at most **${thousands(format.MAX_EXE_BYTES)} bytes**`,
    );
    expect(formatText).toContain(
      `\`cmdline\` at most **${thousands(format.MAX_CMDLINE_BYTES)} bytes**`,
    );
    expect(formatText).toContain(`\`path\` at most **${thousands(format.MAX_PATH_BYTES)} bytes**`);
    expect(formatText).toContain(`\`build_id\` at most **${format.MAX_BUILD_ID_BYTES} bytes**`);
    expect(formatText).toContain(`varint ${format.STREAM_COUNT} (the number of streams)`);
    format.STREAM_NAMES.forEach((name, i) =>
      expect(formatMd).toMatch(new RegExp(`^\\| ${i} +\\| \`${name}\` +\\|`, 'm')),
    );
  });

  it('gives the PROCESS flags, END reasons and LEAK_CHECK triggers their values', () => {
    const flags = constants.filter(([key]) => key.startsWith('PF_'));
    expect(flags.length).toBe(10);
    for (const [, value] of flags)
      expect(row('flags')).toMatch(new RegExp(`(bit |; )${Math.log2(value as number)} `));
    format.END_REASON_NAMES.forEach((_, v) =>
      expect(row('reason')).toMatch(new RegExp(`(\\| |; )${v} `)),
    );
    format.LEAK_TRIGGER_NAMES.forEach((_, v) =>
      expect(row('trigger')).toMatch(new RegExp(`(\\| |, )${v} `)),
    );
  });

  it('gives the address coding its constants', () => {
    expect(formatText).toContain(
      `the ${format.RECENT} addresses freed last (${format.RECENT_V3} when PROCESS flag bit ${Math.log2(format.PF_DEEP_RECENT)} is not set`,
    );
    expect(formatText).toContain(
      `for each size class 1..${format.CLASSES - 1} the ${format.CLASS_DEPTH} addresses`,
    );
    expect(formatText).toContain(
      `\`(b + ${format.CHUNK_HEADER + format.CHUNK_ALIGN - 1}) / ${format.CHUNK_ALIGN}\` (integer division) when \`b <= ${format.CLASS_MAX_BYTES}\``,
    );
    expect(formatText).toContain(
      `last + max(${format.CHUNK_MIN}, (request + ${format.CHUNK_HEADER + format.CHUNK_ALIGN - 1}) & ~${format.CHUNK_ALIGN - 1})`,
    );
  });
});

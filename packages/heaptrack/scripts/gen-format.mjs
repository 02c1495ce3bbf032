#!/usr/bin/env node
/**
 * Writes src/decode/format.generated.ts from native/format/heaplog.h and native/format/fields.h
 * (the table of event fields), the single source of the heaplog format, so that the TypeScript
 * reader cannot build against other constants, nor name the event columns otherwise, than the C. Run by `npm run build` before tsc.
 *
 *   node scripts/gen-format.mjs            writes the file (only when its text changes)
 *   node scripts/gen-format.mjs --stdout   prints it instead (test/integration/format.test.ts)
 *
 * It reads only the forms heaplog.h's opening comment lists and fails on any other line, so a
 * definition it cannot read stops the build instead of going missing:
 *   #define HH_NAME <value>   an integer expression of literals and earlier HH_ names, a "string"
 *                             or a 'c' character
 *   enum [hh_name] { HH_NAME = <value>, ... };
 * plus comments, the include guard, #include lines, typedef structs and _Static_assert (C only).
 * Each HH_NAME becomes `export const NAME`; the comment above a definition or after it on its
 * line becomes its doc comment; a named enum whose members are 0, 1, 2, ... also gives
 * `<NAME>_NAMES`, its members' names in lower case without their common prefix.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');
const HEADER = 'native/format/heaplog.h';
const FIELDS = 'native/format/fields.h';
const OUTPUT = 'src/decode/format.generated.ts';

/** Evaluates an integer expression of the header (BigInt, so << and / are C's on these values). */
function evaluate(expr, values, where) {
  const js = expr.replace(/0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|HH_\w+|[^\s]/g, (token) => {
    if (/^\d|^0[xX]/.test(token)) return `${BigInt(token.replace(/[uUlL]+$/, ''))}n`;
    if (token.startsWith('HH_')) {
      const v = values.get(token);
      if (typeof v !== 'bigint')
        throw new Error(`${where}: ${token} is not an integer defined above`);
      return `(${v}n)`;
    }
    if ('+-*/<>|&~()'.includes(token)) return token;
    throw new Error(`${where}: '${token}' is not part of an integer expression`);
  });
  return new Function(`return (${js});`)();
}

/** A value of a #define or an enum member: bigint, or string for "..." and '.' */
function parseValue(text, values, where) {
  const t = text.trim();
  if (/^"[^"\\]*"$/.test(t)) return t.slice(1, -1);
  if (/^'[^'\\]'$/.test(t)) return t.slice(1, -1);
  return evaluate(t, values, where);
}

function splitComment(line) {
  const m = /^(.*?)\s*\/\*(.*?)\*\/\s*$/.exec(line);
  return m ? { code: m[1], comment: m[2].trim() } : { code: line, comment: undefined };
}

/** Parses heaplog.h into definitions in header order. */
export function parseHeader(text) {
  const lines = text.split('\n');
  const values = new Map();
  const defs = []; // { name, value, expr, doc }
  const enums = []; // { name, members: [name...] }
  let doc; // the comment just above the current line
  const add = (name, valueText, comment, where) => {
    if (!/^HH_[A-Z0-9_]+$/.test(name)) throw new Error(`${where}: ${name} is not an HH_ name`);
    if (values.has(name)) throw new Error(`${where}: ${name} defined twice`);
    const value = parseValue(valueText, values, where);
    if (typeof value === 'bigint' && (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER)))
      throw new Error(`${where}: ${name} = ${value} is not exact as a JavaScript number`);
    values.set(name, value);
    const docs = [doc, comment].filter((d) => d !== undefined);
    defs.push({ name, value, expr: valueText.trim(), doc: docs.join('\n') });
  };
  for (let i = 0; i < lines.length; i++) {
    const where = `${HEADER}:${i + 1}`;
    const line = lines[i];
    const trimmed = line.trim();
    if (trimmed === '') {
      doc = undefined;
      continue;
    }
    if (trimmed.startsWith('/*')) {
      const body = [];
      for (let j = i; ; j++) {
        if (j >= lines.length) throw new Error(`${where}: unterminated comment`);
        body.push(lines[j]);
        if (lines[j].includes('*/')) {
          i = j;
          break;
        }
      }
      const after = body
        .at(-1)
        .slice(body.at(-1).indexOf('*/') + 2)
        .trim();
      if (after !== '') throw new Error(`${where}: code after a comment`);
      const text = body
        .join('\n')
        .replace(/^\s*\/\*+|\*\/\s*$/g, '')
        .split('\n')
        .map((l) => l.replace(/^\s*\* ?/, '').trimEnd())
        .join('\n')
        .trim();
      // A banner (---- title ----) documents a section, not the definition below it.
      doc = /^-+ .* -+$/.test(text) ? undefined : doc ? `${doc}\n${text}` : text;
      continue;
    }
    if (/^#(ifndef|endif)\b|^#define HH_HEAPLOG_H$|^#include </.test(trimmed)) continue;
    const define = /^#define (HH_\w+) (.+)$/.exec(splitComment(trimmed).code);
    if (define) {
      add(define[1], define[2], splitComment(trimmed).comment, where);
      doc = undefined;
      continue;
    }
    const open = /^enum (?:(hh_\w+) )?\{(.*)$/.exec(trimmed);
    if (open) {
      // Members up to the closing "};", one or several to a line.
      let body = open[2];
      const comments = new Map(); // member -> its trailing comment
      let j = i;
      while (!body.includes('}')) {
        j++;
        if (j >= lines.length) throw new Error(`${where}: unterminated enum`);
        const { code, comment } = splitComment(lines[j]);
        const member = /^\s*(HH_\w+)/.exec(code);
        if (member && comment) comments.set(member[1], comment);
        body += `\n${code}`;
      }
      if (!/\}\s*;\s*$/.test(body)) throw new Error(`${where}: enum does not end with "};"`);
      const enumDoc = doc;
      const members = [];
      for (const item of body.slice(0, body.indexOf('}')).split(',')) {
        if (item.trim() === '') continue;
        const m = /^\s*(HH_\w+)\s*=\s*([^]+?)\s*$/.exec(item);
        if (!m) throw new Error(`${where}: enum member without a value: ${item.trim()}`);
        doc = undefined;
        add(m[1], m[2], comments.get(m[1]), `${HEADER}:${i + 1}`);
        members.push(m[1]);
      }
      // The enum's own comment introduces its members (a line comment before the first).
      if (enumDoc !== undefined && members.length > 0)
        defs[defs.length - members.length].section = enumDoc;
      if (open[1]) enums.push({ name: open[1], members });
      i = j;
      doc = undefined;
      continue;
    }
    if (/^typedef struct \w+ \{$/.test(trimmed)) {
      while (!/^\}.*;$/.test(lines[i].trim()))
        if (++i >= lines.length) throw new Error(`${where}: unterminated struct`);
      doc = undefined;
      continue;
    }
    if (trimmed.startsWith('_Static_assert(')) {
      while (!lines[i].trim().endsWith(');'))
        if (++i >= lines.length) throw new Error(`${where}: unterminated _Static_assert`);
      doc = undefined;
      continue;
    }
    throw new Error(
      `${where}: cannot read this line (see the forms scripts/gen-format.mjs reads): ${trimmed}`,
    );
  }
  return { defs, enums, values };
}

function docComment(doc) {
  if (!doc) return '';
  const lines = doc.split('\n');
  if (lines.length === 1 && lines[0].length <= 92) return `/** ${lines[0]} */\n`;
  return `/**\n${lines.map((l) => (l ? ` * ${l}` : ' *')).join('\n')}\n */\n`;
}

function literal(def) {
  if (typeof def.value === 'string') return `'${def.value}'`;
  const hex = /^0[xX]([0-9a-fA-F]+)[uUlL]*$/.exec(def.expr);
  return hex ? `0x${hex[1].toLowerCase()}` : `${def.value}`;
}

/**
 * Reads the table of event fields, HH_EVENT_FIELDS in fields.h: one X(name, coding, ops, flag)
 * each (a line ending in a backslash continues on the next), ops and flag evaluated against
 * heaplog.h's values and fields.h's own `#define HH_OPS_NAME <expression>` lines.
 */
export function parseFields(text, values) {
  const joined = text.replace(/\\\n/g, ' ');
  const opsValues = new Map(values);
  const expand = (expr) => expr.replace(/HH_OPS_BIT\((\w+)\)/g, '(1 << HH_OP_$1)');
  const pending = new Map();
  for (const m of joined.matchAll(/^#define (HH_OPS_[A-Z_]+) (.+)$/gm)) pending.set(m[1], m[2]);
  const resolve = (name, seen = new Set()) => {
    if (opsValues.has(name)) return;
    if (!pending.has(name))
      throw new Error(`${FIELDS}: ${name} is not an HH_OPS_ name defined there`);
    if (seen.has(name)) throw new Error(`${FIELDS}: ${name} is defined in terms of itself`);
    seen.add(name);
    const expr = expand(pending.get(name));
    for (const used of expr.match(/HH_OPS_[A-Z_]+/g) ?? []) resolve(used, seen);
    opsValues.set(name, evaluate(expr, opsValues, `${FIELDS}: ${name}`));
  };
  const evaluateOps = (expr, where) => {
    const expanded = expand(expr);
    for (const used of expanded.match(/HH_OPS_[A-Z_]+/g) ?? []) resolve(used);
    return evaluate(expanded, opsValues, where);
  };
  const table = /#define HH_EVENT_FIELDS\(X\)(.*)$/m.exec(joined);
  if (!table) throw new Error(`${FIELDS}: no #define HH_EVENT_FIELDS(X)`);
  const fields = [];
  // X(name, coding, ops, flag): ops and flag may hold parentheses, never a comma.
  for (const m of table[1].matchAll(
    /\bX\((\w+),\s*(\w+),\s*([^,]+),\s*([^,]+?)\)\s*(?=X\(|HH_EVENT_FIELDS_EXTRA|$)/g,
  )) {
    const [, name, coding, opsExpr, flagExpr] = m;
    if (!['NUM', 'ALIGN', 'OLD', 'NEW'].includes(coding))
      throw new Error(`${FIELDS}: field ${name} has the unknown coding ${coding}`);
    const ops = evaluateOps(opsExpr, `${FIELDS}: field ${name}`);
    const flag = evaluate(flagExpr, opsValues, `${FIELDS}: field ${name}`);
    fields.push({ name, coding, ops: Number(ops), flag: Number(flag) });
  }
  const declared = (table[1].match(/\bX\(/g) ?? []).length;
  if (fields.length === 0 || fields.length !== declared)
    throw new Error(
      `${FIELDS}: read ${fields.length} of the ${declared} fields of HH_EVENT_FIELDS`,
    );
  return fields;
}

/**
 * Reads the table of an RT_VIOLATION record's fields, HH_RT_VIOLATION_FIELDS in fields.h: one
 * X(name, coding) each, coding VAR or STR.
 */
export function parseRtViolationFields(text) {
  const joined = text.replace(/\\\n/g, ' ');
  const table = /#define HH_RT_VIOLATION_FIELDS\(X\)(.*)$/m.exec(joined);
  if (!table) throw new Error(`${FIELDS}: no #define HH_RT_VIOLATION_FIELDS(X)`);
  const fields = [];
  for (const m of table[1].matchAll(/\bX\((\w+),\s*(\w+)\)/g)) {
    const [, name, coding] = m;
    if (!['VAR', 'STR'].includes(coding))
      throw new Error(`${FIELDS}: RT_VIOLATION field ${name} has the unknown coding ${coding}`);
    fields.push({ name, coding });
  }
  const declared = (table[1].match(/\bX\(/g) ?? []).length;
  if (fields.length === 0 || fields.length !== declared)
    throw new Error(
      `${FIELDS}: read ${fields.length} of the ${declared} fields of HH_RT_VIOLATION_FIELDS`,
    );
  return fields;
}

/** The text of format.generated.ts for the header's text and the fields table's. */
export function generate(text, fieldsText) {
  const { defs, enums, values } = parseHeader(text);
  let out =
    `// Generated by scripts/gen-format.mjs from ${HEADER} and ${FIELDS}, the single source\n` +
    `// of the heaplog format, when the package builds. Do not edit: change the headers and build.\n`;
  for (const def of defs) {
    let doc = def.doc;
    if (typeof def.value === 'bigint' && !/^(0[xX][0-9a-fA-F]+|\d+)[uUlL]*$/.test(def.expr))
      doc = `${doc ? `${doc}\n` : ''}C: ${def.expr}`;
    const section = def.section
      ? def.section.replace(/^/gm, '// ').replace(/ +$/gm, '') + '\n'
      : '';
    out += `\n${section}${docComment(doc)}export const ${def.name.slice(3)} = ${literal(def)};\n`;
  }
  for (const { name, members } of enums) {
    if (!members.every((m, k) => values.get(m) === BigInt(k))) continue;
    let prefix = members.reduce((p, m) => {
      while (!m.startsWith(p)) p = p.slice(0, -1);
      return p;
    });
    prefix = prefix.slice(0, prefix.lastIndexOf('_') + 1);
    const names = members.map((m) => `  '${m.slice(prefix.length).toLowerCase()}',\n`).join('');
    const constName = `${name.slice(3).toUpperCase()}_NAMES`;
    out += `\n/** The members of enum ${name}, by value: ${prefix}* in lower case. */\n`;
    out += `export const ${constName} = [\n${names}] as const;\n`;
  }
  if (fieldsText !== undefined) {
    const fields = parseFields(fieldsText, values);
    const hex = (n) => `0x${n.toString(16)}`;
    out += `\n// ---- The fields of an event after its common part (${FIELDS}) ----\n`;
    out += `\n/** Each field in the order written: its coding, the operations (bits 1 << op) that carry it\n`;
    out += ` * and the PROCESS flag without which none does (0: always). */\n`;
    out += `export const EVENT_FIELDS = [\n`;
    for (const f of fields)
      out += `  { name: '${f.name}', coding: '${f.coding.toLowerCase()}', ops: ${hex(f.ops)}, flag: ${f.flag} },\n`;
    out += `] as const;\n`;
    for (const f of fields) {
      const upper = f.name.toUpperCase();
      out += `\n/** The operations whose events carry ${f.name} (bits 1 << op). */\n`;
      out += `export const FIELD_${upper}_OPS = ${hex(f.ops)};\n`;
      out += `/** The PROCESS flag without which no event carries ${f.name} (0: always). */\n`;
      out += `export const FIELD_${upper}_FLAG = ${f.flag};\n`;
    }
    const of = (coding) => fields.filter((f) => f.coding === coding).reduce((a, f) => a | f.ops, 0);
    out += `\n/** The operations whose new block has no size class (they carry an alignment). */\n`;
    out += `export const OPS_ALIGNED = ${hex(of('ALIGN'))};\n`;
    out += `/** The operations that end a block (an old address). */\n`;
    out += `export const OPS_ENDING = ${hex(of('OLD'))};\n`;
    out += `/** The operations that begin a block (a new address). */\n`;
    out += `export const OPS_BEGINNING = ${hex(of('NEW'))};\n`;
    out += `\n// ---- The fields of an RT_VIOLATION record, all in the decl stream (${FIELDS}) ----\n`;
    out += `\n/** Each field in the order written: var a varint, str a string. */\n`;
    out += `export const RT_VIOLATION_FIELDS = [\n`;
    for (const f of parseRtViolationFields(fieldsText))
      out += `  { name: '${f.name}', coding: '${f.coding.toLowerCase()}' },\n`;
    out += `] as const;\n`;
  }
  return out;
}

const isMain = process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1];
if (isMain) {
  let text;
  try {
    text = generate(
      readFileSync(join(packageDir, HEADER), 'utf8'),
      readFileSync(join(packageDir, FIELDS), 'utf8'),
    );
  } catch (error) {
    console.error(`gen-format: ${error.message}`);
    process.exit(1);
  }
  if (process.argv.includes('--stdout')) {
    process.stdout.write(text);
  } else {
    const path = join(packageDir, OUTPUT);
    let old;
    try {
      old = readFileSync(path, 'utf8');
    } catch {
      old = undefined;
    }
    if (old !== text) writeFileSync(path, text);
  }
}

// The reading side of the docs test (../docs.test.ts): fenced blocks out of Markdown, the
// illustrative markers, the commands and shown output of a `console` block, and the comparison
// of shown output with a real run's. Nothing here runs anything.

/** An HTML comment right before a fenced block (blank lines between allowed) that keeps the
 * block from being run, with the reason: `<!-- illustrative: needs ROS 2 -->`. */
export const ILLUSTRATIVE = /^<!--\s*illustrative:(.*?)-->$/;

/** Info strings of shell blocks: `sh`, `bash` and `shell` run as scripts, `console` as a
 * session of `$ ` commands with their output. */
export const SCRIPT_LANGS = ['sh', 'bash', 'shell'] as const;
export const SHELL_LANGS: readonly string[] = [...SCRIPT_LANGS, 'console'];

export interface FencedBlock {
  /** The file, relative to the repository. */
  readonly file: string;
  /** 1-based line of the opening fence. */
  readonly line: number;
  /** The info string's first word ('' when none). */
  readonly lang: string;
  /** The text between the fences. */
  readonly body: string;
  /** The `## ` heading the block is under ('' before the first one). */
  readonly section: string;
  /** The reason given by an illustrative marker, when the block has one. */
  readonly illustrative?: string;
}

export interface ParsedMarkdown {
  readonly blocks: FencedBlock[];
  /** Markers that are not right before a block, or give no reason: "file:line: what". */
  readonly markerProblems: string[];
}

export function parseMarkdown(file: string, text: string): ParsedMarkdown {
  const lines = text.split('\n');
  const blocks: FencedBlock[] = [];
  const markerProblems: string[] = [];
  let section = '';
  let pending: { line: number; reason: string } | undefined;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    const open = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)/.exec(line);
    if (open) {
      const fence = open[1]!;
      const body: string[] = [];
      let j = i + 1;
      const closing = new RegExp(`^ {0,3}${fence[0]}{${fence.length},}\\s*$`);
      while (j < lines.length && !closing.test(lines[j]!)) body.push(lines[j++]!);
      const block: FencedBlock = {
        file,
        line: i + 1,
        lang: open[2]!,
        body: body.join('\n'),
        section,
        ...(pending !== undefined ? { illustrative: pending.reason } : {}),
      };
      if (pending !== undefined && !SHELL_LANGS.includes(block.lang))
        markerProblems.push(
          `${file}:${pending.line}: an illustrative marker before a \`${block.lang}\` block (only shell blocks run)`,
        );
      blocks.push(block);
      pending = undefined;
      i = j;
      continue;
    }
    const marker = ILLUSTRATIVE.exec(line.trim());
    if (marker) {
      if (pending !== undefined)
        markerProblems.push(
          `${file}:${pending.line}: an illustrative marker with no block after it`,
        );
      const reason = marker[1]!.trim();
      if (reason === '')
        markerProblems.push(`${file}:${i + 1}: an illustrative marker without a reason`);
      pending = { line: i + 1, reason };
      continue;
    }
    if (line.trim() === '') continue;
    if (pending !== undefined) {
      markerProblems.push(`${file}:${pending.line}: an illustrative marker with no block after it`);
      pending = undefined;
    }
    const heading = /^## (.*)$/.exec(line);
    if (heading) section = heading[1]!.trim();
  }
  if (pending !== undefined)
    markerProblems.push(`${file}:${pending.line}: an illustrative marker with no block after it`);
  return { blocks, markerProblems };
}

/** One `$ ` command of a console block (its continuation lines joined) and the lines shown
 * under it. */
export interface ConsoleCommand {
  readonly command: string;
  readonly shown: string[];
}

export function parseConsole(body: string): ConsoleCommand[] {
  const commands: { command: string; shown: string[] }[] = [];
  const lines = body.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (line.startsWith('$ ')) {
      let command = line.slice(2);
      while (command.endsWith('\\') && i + 1 < lines.length) command += `\n${lines[++i]!}`;
      commands.push({ command, shown: [] });
    } else if (commands.length === 0) {
      if (line.trim() !== '')
        throw new Error(`a console block must start with a "$ " command, not "${line}"`);
    } else {
      commands[commands.length - 1]!.shown.push(line);
    }
  }
  return commands;
}

// A number as the CLI prints it, with its unit when it has one: 6,824  8.05 MiB  448.9 ms  0x55d1c54f52a0.
const UNIT = String.raw`(?:[KMGT]i?B|[kKMG]B|B|bytes|ms|µs|us|ns|s)(?![\p{L}\p{N}])`;
const NUMBER = String.raw`0x[0-9a-f]+|\d+(?:[.,]\d+)*(?:\s?${UNIT})?`;
const NUMBER_SOURCE = new RegExp(NUMBER, 'gu');
const ZERO = /^0(?![.,\dx])/;
// Zero says something ("grew 0 time(s)", "0 dropped"): it matches only zero, and other numbers
// never match it.
const A_ZERO = String.raw`0(?![.,]?\d|x)(?:\s?${UNIT})?`;
const NOT_ZERO = String.raw`(?!${A_ZERO}(?![\p{L}\p{N}]))(?:${NUMBER})`;
const ELLIPSIS = /\s*(?:\.\.\.|…)\s*/g;

const escape = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const literal = (text: string): string => escape(text).replace(/\s+/g, String.raw`\s+`);

/**
 * A regular expression for one shown line. Numbers vary from run to run (pids, times, sizes,
 * counts), so any number (with or without its unit) matches any other, except:
 *  - zero matches only zero, and no other number matches zero;
 *  - a number already bound (below) matches only its bound value.
 * `...` matches anything; runs of white space match any white space. A number of three or more
 * digits without a unit is captured, so that the caller can bind it.
 */
function shownLinePattern(
  shown: string,
  bindings: ReadonlyMap<string, string>,
): { pattern: RegExp; captured: string[] } {
  const captured: string[] = [];
  let source = '';
  const group = new Map<string, number>(); // a number captured twice in a line is one value
  const pieces = shown.trim().split(ELLIPSIS);
  pieces.forEach((piece, k) => {
    if (k > 0) source += '.*?';
    let last = 0;
    for (const m of piece.matchAll(NUMBER_SOURCE)) {
      const number = m[0];
      source += literal(piece.slice(last, m.index));
      last = m.index + number.length;
      const bound = bindings.get(number);
      if (bound !== undefined) source += escape(bound);
      else if (ZERO.test(number)) source += A_ZERO;
      else if (group.has(number)) source += `\\${group.get(number)!}`;
      else if (/^\d{3,}$/.test(number)) {
        captured.push(number);
        group.set(number, captured.length);
        source += `(${NOT_ZERO})`;
      } else source += NOT_ZERO;
    }
    source += literal(piece.slice(last));
  });
  return { pattern: new RegExp(`^${source}$`, 'u'), captured };
}

const stripAnsi = (text: string): string => text.replace(/\x1b\[[0-9;]*[A-Za-z]/g, '');

/**
 * Checks that every shown line appears in the output, in order (the shown output may leave
 * lines out, and a line that is only `...` stands for those). New bindings (a shown number of
 * three or more digits → the number in the real output) are added to `bindings`, so that a
 * later command that reuses a shown pid or size gets the real one. Returns the first shown
 * line not found, or undefined.
 */
export function findMissingLine(
  shown: readonly string[],
  output: string,
  bindings: Map<string, string>,
): string | undefined {
  const actual = stripAnsi(output)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  let cursor = 0;
  for (const line of shown) {
    const trimmed = line.trim();
    if (trimmed === '' || /^(\.\.\.|…)$/.test(trimmed)) continue;
    const { pattern, captured } = shownLinePattern(trimmed, bindings);
    let found = -1;
    let match: RegExpExecArray | null = null;
    for (let k = cursor; k < actual.length && found < 0; k++) {
      match = pattern.exec(actual[k]!);
      if (match) found = k;
    }
    if (found < 0 || match === null) return line;
    captured.forEach((number, g) => {
      const value = match![g + 1]!;
      if (/^\d+$/.test(value)) bindings.set(number, value);
    });
    cursor = found + 1;
  }
  return undefined;
}

/** A command with the numbers bound by earlier output replaced by the real run's. */
export function applyBindings(command: string, bindings: ReadonlyMap<string, string>): string {
  if (bindings.size === 0) return command;
  const shown = [...bindings.keys()].sort((a, b) => b.length - a.length);
  return command.replace(new RegExp(`(?<!\\d)(?:${shown.join('|')})(?!\\d)`, 'g'), (number) =>
    bindings.get(number)!,
  );
}

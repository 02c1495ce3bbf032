/**
 * Text that comes from a traced program or its binaries — symbol names, source and module
 * paths, argv, file names — is hostile: it may hold an ESC that drives a terminal, a newline
 * that forges a line of output, a `::error` or `##[add-mask]` that a CI runner obeys, a byte
 * that makes XML invalid. Every such string written for people goes through one function per
 * output format, each built on displayText:
 *
 *   displayText / terminalText   a line of a terminal or a CI log
 *   xmlText                      XML 1.0 text and attribute values (JUnit, SVG)
 *   htmlText                     HTML text and attribute values
 *   githubData, githubProperty   the message and the properties of a GitHub workflow command
 *
 *   jsonText                     JSON (JSON.stringify, lossless, with the same code points
 *                                escaped as \uNNNN)
 *
 * Names that JSON carries for display (a report's stack frames) are displayText already.
 * Binary data formats (pprof, Perfetto) keep the raw names.
 */

/**
 * Code points that change how text reads rather than what it says: C0 and C1 controls and
 * DEL, bidirectional overrides and isolates ("Trojan Source"), line and paragraph separators,
 * the BOM and interlinear annotation marks, the noncharacters U+FFFE and U+FFFF, and halves
 * of surrogate pairs without their other half (not valid UTF-8, XML or UTF-16).
 */
const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/** The same but C0 controls and surrogates (which JSON.stringify escapes itself). */
const UNSAFE_BEYOND_C0 =
  /[\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ufff9-\ufffb\ufffe\uffff]/g;

/**
 * `::` as the first non-blank characters of a line: a GitHub Actions workflow command
 * (`::error`, `::add-mask::`, `::stop-commands::`); the runner trims leading white space
 * (Unicode's too) before it looks.
 */
const LINE_COMMAND = /^(\s*):(?=:)/;

/**
 * `##[command]` (GitHub's legacy form, obeyed anywhere in a line), `##vso[...]` (Azure
 * Pipelines) and `##teamcity[...]` (TeamCity service messages).
 */
const INLINE_COMMAND = /#(?=#[a-z]*\[)/gi;

function escape(ch: string): string {
  const code = ch.charCodeAt(0);
  return code < 0x100
    ? `\\x${code.toString(16).padStart(2, '0')}`
    : `\\u${code.toString(16).padStart(4, '0')}`;
}

/**
 * Hostile text made safe to show: each unsafe code point (above) as `\xNN` (below U+0100) or
 * `\uNNNN`, so a name stays on its line and cannot restyle the terminal; a leading `::` as
 * `\x3a:` and the `#` opening `##[` / `##vso[` as `\x23`, so a CI runner never reads a
 * command in it. Everything else (UTF-8 names, `std::vector<int>::push_back`) is unchanged.
 * Applying it twice gives the same text as once.
 */
export function displayText(text: string): string {
  return text
    .replace(UNSAFE, escape)
    .replace(LINE_COMMAND, '$1\\x3a')
    .replace(INLINE_COMMAND, '\\x23');
}

/** Text for a line of a terminal or of a CI log: displayText. */
export function terminalText(text: string): string {
  return displayText(text);
}

/**
 * XML 1.0 character data and attribute values (in double or single quotes): displayText,
 * whose output has no character XML forbids (not even as a reference), then the five markup
 * characters as entities.
 */
export function xmlText(text: string): string {
  return displayText(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** HTML text and quoted attribute values: the same rules as XML. */
export function htmlText(text: string): string {
  return xmlText(text);
}

/**
 * The message of a GitHub Actions workflow command (after its `::`): displayText, then the
 * runner's own escapes (`%` as %25; CR and LF, already shown as \x0d and \x0a, cannot end the
 * command).
 */
export function githubData(text: string): string {
  return displayText(text).replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
}

/** A property value of a workflow command (`file=`, `title=`): githubData, and `:` and `,`. */
export function githubProperty(text: string): string {
  return githubData(text).replace(/:/g, '%3A').replace(/,/g, '%2C');
}

/**
 * JSON.stringify whose output is also safe to show: the same data (a JSON parser reads back
 * exactly the value), with displayText's unsafe code points and the `#` of `##[` written as
 * \uNNNN escapes inside the strings, so a terminal or a CI runner showing the JSON sees
 * neither a control character nor a command.
 */
export function jsonText(value: unknown, space?: number): string {
  const json = JSON.stringify(value, null, space);
  if (json === undefined) throw new TypeError('jsonText: the value has no JSON form');
  // JSON.stringify escapes C0 controls and lone surrogates itself; a raw C0 character in its
  // output is the indentation's newline, outside any string.
  return json
    .replace(UNSAFE_BEYOND_C0, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .replace(INLINE_COMMAND, '\\u0023');
}

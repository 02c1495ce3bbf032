/**
 * How a recommendation is printed: the environment lines, a `heaphook run` command and ROS 2
 * launch snippets (XML and Python), then the figures it rests on. The argv and paths are the
 * traced program's: each snippet quotes them in its own language, writing a control character
 * as an escape that language reads back (displayText's `\xNN`), never raw.
 */
import { basename } from 'node:path';

import { displayText, jsonText, terminalText, xmlText } from '@heaphook/core';

import type { Recommendation } from './search.js';

/**
 * Quotes a word for a POSIX shell when it needs it; a word displayText would change (a control
 * character, `##[`) in bash's $'...', whose \xNN and \uNNNN escapes give the word back.
 */
export function shellQuote(word: string): string {
  if (word !== '' && /^[A-Za-z0-9_@%+=:,./-]+$/.test(word)) return word;
  if (displayText(word) !== word) {
    return `$'${displayText(word.replace(/\\/g, '\\\\').replace(/'/g, "\\'"))}'`;
  }
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** An XML attribute value: xmlText (XML cannot hold a control character at all). */
function xmlAttr(value: string): string {
  return xmlText(value);
}

/** A Python string literal: Python reads displayText's \xNN and \uNNNN escapes back. */
function pyString(value: string): string {
  return `'${displayText(value.replace(/\\/g, '\\\\').replace(/'/g, "\\'"))}'`;
}

/** The command line to run with the recommendation (the recorded argv). */
export function runCommand(r: Recommendation): string {
  const env = Object.entries(r.env).map(([k, v]) => `-e ${k}=${v}`);
  const argv = r.argv.length > 0 ? r.argv : [r.exe];
  return ['heaphook run -b tlsf', ...env, '--', ...argv.map(shellQuote)].join(' ');
}

/** The ROS 2 package and executable of a node installed by colcon
 * (<prefix>/lib/<package>/<executable>), or placeholders. */
export function rosNames(r: Recommendation): { pkg: string; exec: string; known: boolean } {
  const m = /\/lib\/([^/]+)\/([^/]+)$/.exec(r.exe);
  if (m !== null && !m[1]!.startsWith('python') && m[1] !== 'x86_64-linux-gnu') {
    return { pkg: m[1]!, exec: m[2]!, known: true };
  }
  return { pkg: 'YOUR_PACKAGE', exec: basename(r.argv[0] ?? r.exe), known: false };
}

function launchEnv(r: Recommendation, libraryPath: string): [string, string][] {
  return [['LD_PRELOAD', libraryPath], ...Object.entries(r.env)];
}

export function launchXml(r: Recommendation, libraryPath: string): string {
  const { pkg, exec, known } = rosNames(r);
  const lines: string[] = [];
  if (!known) lines.push("<!-- set pkg (and exec) to your node's package and executable -->");
  const args = r.argv.slice(1);
  const argsAttr = args.length > 0 ? ` args="${xmlAttr(args.map(shellQuote).join(' '))}"` : '';
  lines.push(`<node pkg="${xmlAttr(pkg)}" exec="${xmlAttr(exec)}"${argsAttr} output="screen">`);
  for (const [k, v] of launchEnv(r, libraryPath)) {
    lines.push(`  <env name="${xmlAttr(k)}" value="${xmlAttr(v)}"/>`);
  }
  lines.push('</node>');
  return lines.join('\n');
}

export function launchPython(r: Recommendation, libraryPath: string): string {
  const { pkg, exec, known } = rosNames(r);
  const lines: string[] = [];
  lines.push('from launch_ros.actions import Node');
  lines.push('');
  if (!known) lines.push("# set package (and executable) to your node's package and executable");
  lines.push('Node(');
  lines.push(`    package=${pyString(pkg)},`);
  lines.push(`    executable=${pyString(exec)},`);
  if (r.argv.length > 1) lines.push(`    arguments=[${r.argv.slice(1).map(pyString).join(', ')}],`);
  lines.push("    output='screen',");
  lines.push('    additional_env={');
  for (const [k, v] of launchEnv(r, libraryPath))
    lines.push(`        ${pyString(k)}: ${pyString(v)},`);
  lines.push('    },');
  lines.push(')');
  return lines.join('\n');
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** The human-readable report. */
export function formatRecommendation(r: Recommendation, libraryPath: string): string {
  const out: string[] = [];
  out.push(`# heaphook recommend ${terminalText(r.log)}`);
  out.push(`# process ${r.pid}: ${terminalText(r.argv.join(' '))}`);
  out.push(
    `# ${r.events} events from ${r.threads} thread(s), replayed through the TLSF addon ` +
      `(${r.replays} pools in ${r.passes} passes)`,
  );
  out.push('');
  for (const [k, v] of Object.entries(r.env)) out.push(`${k}=${v}`);
  out.push('');
  out.push(`heaphook run: ${runCommand(r)}`);
  out.push('');
  out.push('ROS 2 launch (XML):');
  out.push(launchXml(r, libraryPath));
  out.push('');
  out.push('ROS 2 launch (Python):');
  out.push(launchPython(r, libraryPath));
  out.push('');
  out.push(`peak live bytes:      ${r.peakLiveBytes} (${mib(r.peakLiveBytes)})`);
  out.push(
    `peak footprint:       ${r.peakFootprintBytes} (block heads and 16-byte rounding included)`,
  );
  out.push(
    `replayed minimum:     ${r.replayedMinimum} (${mib(r.replayedMinimum)}; ` +
      `${r.largestFailing} bytes grew; precision ${r.precision})`,
  );
  out.push(
    `recommended:          ${r.initialPoolSize} (${mib(r.initialPoolSize)}) = minimum + ` +
      `${r.marginPercent}% margin, rounded up to ${r.roundTo} bytes; confirmed by a replay`,
  );
  out.push(`recommended / peak:   ${r.ratioToPeak.toFixed(2)}`);
  out.push('');
  out.push(
    'Rules: ADDITIONAL_MEMPOOL_SIZE is a quarter of the initial pool, at least the largest ' +
      `recorded request (${r.largestRequest} bytes) with its alignment, rounded up the same way: ` +
      'should the program need more than recorded, one growth serves any request it made.',
  );
  out.push(
    'HEAPHOOK_TLSF_THREAD_HEAPS=0: the replay is one TLSF heap, exactly what the backend runs ' +
      'with thread heaps off. With thread heaps on (the default), each thread allocates from ' +
      'chunks it borrows from the pool and keeps (its own peak), plus a cache of freed small ' +
      'blocks: threads that peak at different times need about the sum of their peaks, which ' +
      'the log order does not determine, and even one thread carves the pool differently.' +
      (r.threads > 1 ? ` This program has ${r.threads} threads.` : ''),
  );
  for (const note of r.notes) out.push(`Note: ${note}`);
  return `${out.join('\n')}\n`;
}

/** The --json form: the recommendation plus the rendered command and snippets. */
export function recommendationJson(r: Recommendation, libraryPath: string): string {
  return `${jsonText(
    {
      ...r,
      threadHeaps: false,
      runCommand: runCommand(r),
      launchXml: launchXml(r, libraryPath),
      launchPython: launchPython(r, libraryPath),
    },
    2,
  )}\n`;
}

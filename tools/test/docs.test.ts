// The docs run. Every shell block of the guides (docs/guides/*.md) and of the READMEs' tours
// (the root README's "A 30-second tour"; in packages/*/README.md and tools/README.md the lead,
// before the first `## ` heading, and a section named "Use it") is either run here or marked
// illustrative, so the commands the docs show cannot drift from the code again.
//
// Shell blocks are fenced blocks with the info string `sh`, `bash`, `shell` or `console`.
//
// Illustrative: an HTML comment on the line(s) right before the block, with the reason,
//
//     <!-- illustrative: needs ROS 2 -->
//
// for blocks that cannot run here (ROS 2, AIX, sudo, installs, the network, a long benchmark).
// Such a block is not run; a marker that is not right before a shell block, or gives no
// reason, fails. An unmarked block in scope is run; one that asks for something the test never
// does (sudo, apt, npm install, nx, colcon, ros2) fails, asking for a marker.
//
// How a block runs: the blocks of one Markdown file run one after another, in the file's
// order, in a scratch folder of their own (the files run in parallel). The folder holds
//  - node_modules, a link to the workspace's: `heaphook` and `npx heaphook` are the workspace's
//    built CLI (npx is a shim that starts it directly: npm's own start-up would double the
//    test's time; any other npx command goes to npm's npx, offline);
//  - bin/python3, the real interpreter (not a pyenv shim, whose helpers would each leave a log);
//  - the programs the docs name: talker.py, script.py, work.py, and ./app, ./my_node,
//    ./my_program and ./rt_node, one small C program (built once for all folders) that
//    allocates, frees and prints a line.
// Two placeholders are filled in: `heaplog.<pid>.log` becomes the glob `heaplog.*.log` (the log
// the block's folder holds), and the pid 4242 becomes that of a program started for the block
// (./my_node, allocating until it is killed after the block).
//
// `sh`, `bash`, `shell`: the block is one script run by `bash -e -o pipefail`; it must exit 0.
//
// `console`: each `$ ` line is a command (a line ending in `\` continues it), the lines under it
// its output. The commands run one after another in one bash; each must exit 0 unless the next
// command is `echo $?`, whose shown output says the status. The lines shown under a command must
// appear in its output (stdout and stderr), in order, but output may be left out (`...` on a
// line of its own says so, and `...` inside a line matches anything). Numbers vary from run to
// run, so any number (with its unit: 6,824  8.05 MiB  448.9 ms) matches any number, but zero
// matches only zero and no other number matches zero; a number of three or more digits shown in
// output (a pid, a pool size) is bound to the real run's, and later commands that reuse it get
// the real one.
//
// Besides: every relative link of the docs names a file that exists (and a heading of it), and
// every `heaphook <command> [<subcommand>] --option` they show is one the CLI's --help lists.
//
// Measured: 61 s on the shared 2-core machine at a load average of 8 (the root README's tour is
// the longest chain, ~35 s: its report renders the charts, and `record -p` traces for 3 s).
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import {
  applyBindings,
  findMissingLine,
  type FencedBlock,
  parseConsole,
  parseMarkdown,
  SHELL_LANGS,
} from './helpers/docs.js';
import { childEnv, repoRoot } from './helpers/workspace.js';

// ---- Which docs, which blocks ---------------------------------------------------------------

const guides = readdirSync(join(repoRoot, 'docs/guides'))
  .filter((name) => name.endsWith('.md'))
  .map((name) => `docs/guides/${name}`);
const packageReadmes = readdirSync(join(repoRoot, 'packages'))
  .map((name) => `packages/${name}/README.md`)
  .filter((file) => existsSync(join(repoRoot, file)));

/** The docs with shell blocks in scope, and which of their sections ('' is the lead, before
 * the first `## ` heading). */
type SectionFilter = (section: string) => boolean;
const everySection: SectionFilter = () => true;
const theTour: SectionFilter = (section) => section === 'A 30-second tour';
const leadAndUseIt: SectionFilter = (section) => section === '' || section === 'Use it';
const SCOPE = new Map<string, SectionFilter>([
  ...guides.map((file): [string, SectionFilter] => [file, everySection]),
  ['README.md', theTour],
  ...[...packageReadmes, 'tools/README.md'].map((file): [string, SectionFilter] => [
    file,
    leadAndUseIt,
  ]),
]);

/** Every Markdown file of the repository (for the markers, the links and the options). */
function markdownFiles(dir = ''): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(join(repoRoot, dir))) {
    if (/^(node_modules|dist|build.*|results|\.git|\.nx)$/.test(entry)) continue;
    const path = dir === '' ? entry : `${dir}/${entry}`;
    if (statSync(join(repoRoot, path)).isDirectory()) out.push(...markdownFiles(path));
    else if (entry.endsWith('.md')) out.push(path);
  }
  return out;
}
const allDocs = markdownFiles();
const parsed = new Map(
  allDocs.map((file) => [file, parseMarkdown(file, readFileSync(join(repoRoot, file), 'utf8'))]),
);

const isShell = (block: FencedBlock): boolean => SHELL_LANGS.includes(block.lang);
const inScope = (block: FencedBlock): boolean =>
  isShell(block) && (SCOPE.get(block.file)?.(block.section) ?? false);
const scopeBlocks = [...SCOPE.keys()].flatMap((file) =>
  (parsed.get(file)?.blocks ?? []).filter(inScope),
);
const runnable = scopeBlocks.filter((block) => block.illustrative === undefined);
const runnableFiles = [...new Set(runnable.map((block) => block.file))];

/** What a docs block must never do here: it needs a marker instead. */
const NEVER_RUN =
  /\bsudo\b|\bapt(-get)?\b|\bnpm (i|install|ci)\b|\bnx\b|\bcolcon\b|\bros2\b|bench:compare/;

// ---- The scratch folders ----------------------------------------------------------------------

/** The stand-in for the reader's own program (./app, ./my_node ...). `serve`: keeps allocating
 * until killed (at most 2 minutes), for the docs that attach to a running process. */
const PROGRAM = String.raw`
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static unsigned long messages(int rounds) {
  unsigned long total = 0;
  for (int r = 0; r < rounds; r++) {
    char *kept[1000];
    for (int i = 0; i < 1000; i++) {
      kept[i] = malloc(32 + (i % 64) * 8);
      snprintf(kept[i], 32, "message %d", i);
      total += strlen(kept[i]);
    }
    for (int i = 0; i < 1000; i++) free(kept[i]);
  }
  char *frame = malloc(1 << 20); /* served by mmap: a memory event */
  memset(frame, 1, 1 << 20);
  free(frame);
  return total;
}
int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "serve") == 0) {
    alarm(120);
    for (;;) { messages(1); usleep(50000); }
  }
  printf("%lu bytes of messages\n", messages(20));
  return 0;
}
`;
const PROGRAM_NAMES = ['app', 'my_node', 'my_program', 'rt_node'];

const SCRIPTS: Record<string, string> = {
  // README's tour: builds 20,000 small dicts and serialises them.
  'talker.py': `import json
messages = [{"id": i, "topic": "/chatter", "data": "hello world, message number %d" % i,
             "stamp": {"sec": i // 1000, "nanosec": i % 1000}} for i in range(20000)]
payload = json.dumps(messages)
print(len(messages), "messages")
`,
  'script.py': `print(sum(len(str(i)) for i in range(100000)))
`,
  // ros2.md's node stand-in: a few MB of dicts turned into JSON.
  'work.py': `import json
data = [{"id": i, "name": "x" * (i % 40), "values": list(range(i % 16))} for i in range(8000)]
text = json.dumps(data)
print(len(text))
`,
};

let fixtures = '';
let python = '';
const scratches: string[] = [];

function prepareFixtures(): void {
  fixtures = mkdtempSync(join(tmpdir(), 'heaphook-docs-fixtures-'));
  writeFileSync(join(fixtures, 'program.c'), PROGRAM);
  // -fno-builtin: gcc would otherwise delete the malloc/free pairs.
  const cc = spawnSync(
    'cc',
    ['-O2', '-fno-builtin', '-o', join(fixtures, 'program'), join(fixtures, 'program.c')],
    { encoding: 'utf8' },
  );
  if (cc.status !== 0) throw new Error(`cc failed: ${cc.stderr}`);
  const py = spawnSync('python3', ['-c', 'import sys; print(sys.executable)'], {
    encoding: 'utf8',
  });
  if (py.status !== 0) throw new Error(`python3 failed: ${py.stderr}`);
  python = py.stdout.trim();
}

const realNpx = existsSync(join(dirname(process.execPath), 'npx'))
  ? join(dirname(process.execPath), 'npx')
  : 'npx';
const heaphookBin = join(repoRoot, 'packages/core/bin/heaphook.js');

/** A scratch folder for the blocks of one file. */
function scratchFor(file: string): string {
  const dir = mkdtempSync(join(tmpdir(), `heaphook-docs-${file.replace(/[^\w]+/g, '-')}-`));
  scratches.push(dir);
  symlinkSync(join(repoRoot, 'node_modules'), join(dir, 'node_modules'));
  mkdirSync(join(dir, 'bin'));
  symlinkSync(python, join(dir, 'bin/python3'));
  writeFileSync(
    join(dir, 'bin/npx'),
    `#!/bin/sh\nif [ "$1" = heaphook ]; then shift; exec "${process.execPath}" "${heaphookBin}" "$@"; fi\nexec "${realNpx}" "$@"\n`,
    { mode: 0o755 },
  );
  for (const [name, text] of Object.entries(SCRIPTS)) writeFileSync(join(dir, name), text);
  for (const name of PROGRAM_NAMES) symlinkSync(join(fixtures, 'program'), join(dir, name));
  return dir;
}

function blockEnv(dir: string): NodeJS.ProcessEnv {
  const base = childEnv({ npm_config_offline: 'true' });
  return {
    ...base,
    PATH: [
      join(dir, 'bin'),
      join(repoRoot, 'node_modules/.bin'),
      dirname(process.execPath),
      base.PATH ?? '',
    ].join(':'),
  };
}

// ---- Running a block --------------------------------------------------------------------------

interface BlockRun {
  /** Why the block failed, or undefined. */
  readonly failure?: string;
  /** What ran and what it printed, for the failure message. */
  readonly transcript: string;
}

const BLOCK_TIMEOUT_MS = 150_000;

/** A bash that runs commands one at a time and says how each ended. */
class Shell {
  private readonly child: ChildProcess;
  private chunks: string[] = [];
  private tail = '';
  private errors = '';
  private onChunk: (() => void) | undefined;
  private onExit: (() => void) | undefined;
  private static readonly MARK = `@@docs-test-${process.pid}-status`;
  private static readonly END = new RegExp(`\\n${Shell.MARK} (\\d+)\\n$`);

  constructor(dir: string, env: NodeJS.ProcessEnv) {
    this.child = spawn('bash', [], { cwd: dir, env, stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      this.chunks.push(chunk);
      // The mark ends a command's output: only the last bytes need looking at.
      this.tail = (this.tail + chunk).slice(-200);
      this.onChunk?.();
    });
    this.child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (this.errors += chunk));
    this.child.on('exit', () => this.onExit?.());
    this.child.stdin!.write('__docs_status=0\n__docs_restore() { return "$1"; }\n');
  }

  /** Runs one command (with $? still the previous command's status); its output and status. */
  run(command: string): Promise<{ status: number; output: string }> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.close();
        reject(new Error(`timed out after ${BLOCK_TIMEOUT_MS / 1000} s`));
      }, BLOCK_TIMEOUT_MS);
      this.onChunk = () => {
        const end = Shell.END.exec(this.tail);
        if (!end) return;
        clearTimeout(timer);
        this.onChunk = undefined;
        const text = this.chunks.join('');
        this.chunks = [];
        this.tail = '';
        resolve({ status: Number(end[1]), output: text.slice(0, text.length - end[0].length) });
      };
      this.onExit = () => reject(new Error(`bash ended: ${this.errors}`));
      this.child.stdin!.write(
        `__docs_restore "$__docs_status"\n{ ${command}\n} </dev/null 2>&1\n__docs_status=$?\n` +
          `printf '\\n%s %d\\n' '${Shell.MARK}' "$__docs_status"\n`,
      );
    });
  }

  close(): void {
    this.child.stdin!.end();
    if (this.child.exitCode === null) this.child.kill('SIGKILL');
  }
}

/** The last lines of a long output (a failure message needs no more). */
function lastLines(text: string, count = 60): string {
  const lines = text.split('\n');
  return lines.length <= count
    ? text
    : [`... (${lines.length - count} lines before)`, ...lines.slice(-count)].join('\n');
}

/** The placeholders of the header: a log's glob, a running program's pid. */
function fillPlaceholders(text: string, runningPid: number | undefined): string {
  const filled = text.replace(/heaplog\.<pid>\.log/g, 'heaplog.*.log');
  return runningPid === undefined ? filled : filled.replace(/\b4242\b/g, String(runningPid));
}

async function startRunningProgram(dir: string): Promise<ChildProcess> {
  const child = spawn(join(dir, 'my_node'), ['serve'], { cwd: dir, stdio: 'ignore' });
  await new Promise<void>((resolve, reject) => {
    child.once('spawn', resolve);
    child.once('error', reject);
  });
  await new Promise((resolve) => setTimeout(resolve, 200)); // past the dynamic loader
  return child;
}

async function runBlock(block: FencedBlock, dir: string): Promise<BlockRun> {
  const transcript: string[] = [];
  const done = (failure?: string): BlockRun => ({
    ...(failure !== undefined ? { failure } : {}),
    transcript: transcript.join('\n'),
  });
  if (NEVER_RUN.test(block.body))
    return done(
      `it asks for ${NEVER_RUN.exec(block.body)![0]}: mark it <!-- illustrative: reason --> instead`,
    );
  const running = /\b4242\b/.test(block.body) ? await startRunningProgram(dir) : undefined;
  const shell = new Shell(dir, blockEnv(dir));
  try {
    if (block.lang !== 'console') {
      const script = fillPlaceholders(block.body, running?.pid);
      const quoted = `'${script.replace(/'/g, `'\\''`)}'`;
      const { status, output } = await shell.run(`bash -e -o pipefail -c ${quoted}`);
      transcript.push(script, lastLines(output));
      return done(status === 0 ? undefined : `the block exited with status ${status}`);
    }
    const commands = parseConsole(block.body);
    const bindings = new Map<string, string>();
    for (const [k, { command, shown }] of commands.entries()) {
      const real = fillPlaceholders(applyBindings(command, bindings), running?.pid);
      const { status, output } = await shell.run(real);
      transcript.push(`$ ${real}`, lastLines(output, 200));
      const statusShown = commands[k + 1]?.command.trim() === 'echo $?';
      if (status !== 0 && !statusShown)
        return done(`\`${real}\` exited with status ${status} (show it with "$ echo $?")`);
      const missing = findMissingLine(shown, output, bindings);
      if (missing !== undefined)
        return done(`the output of \`${real}\` has no line like the one shown:\n  ${missing}`);
    }
    return done();
  } catch (error) {
    return done((error as Error).message);
  } finally {
    shell.close();
    running?.kill('SIGKILL');
  }
}

/** Each runnable block's run; the blocks of one file one after another, the files at once.
 * Started by the first block's test, so that a run filtered to other tests runs no block. */
const runs = new Map<FencedBlock, Promise<BlockRun>>();

function startRuns(): void {
  if (runs.size > 0) return;
  cliOptions().catch(() => undefined); // asked now, beside the blocks (its test reports errors)
  prepareFixtures();
  for (const file of runnableFiles) {
    const dir = scratchFor(file);
    let previous: Promise<unknown> = Promise.resolve();
    for (const block of runnable.filter((b) => b.file === file)) {
      const run = previous.then(() => runBlock(block, dir));
      runs.set(block, run);
      previous = run;
    }
  }
}

afterAll(async () => {
  await Promise.allSettled(runs.values());
  for (const dir of [...scratches, fixtures])
    if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

// ---- The specification ------------------------------------------------------------------------

describe('shell blocks of the guides and the tours', () => {
  it('are in the docs named in scope (the guides, the READMEs and their tours exist)', () => {
    for (const file of SCOPE.keys()) expect(existsSync(join(repoRoot, file)), file).toBe(true);
    expect(runnableFiles).toContain('README.md');
  });

  it('show commands only in shell blocks (so that none escapes being run)', () => {
    const looksLikeCommands = /^(\$ |npx |heaphook (?![\w-]*[:[])|LD_PRELOAD=)/m;
    const unlabelled = [...SCOPE.keys()]
      .flatMap((file) => parsed.get(file)?.blocks ?? [])
      .filter((block) => SCOPE.get(block.file)!(block.section) && !isShell(block))
      .filter((block) => looksLikeCommands.test(block.body))
      .map((block) => `${block.file}:${block.line} (\`${block.lang}\`)`);
    expect(unlabelled).toEqual([]);
  });

  it('illustrative markers stand right before a shell block and give a reason', () => {
    expect([...parsed.values()].flatMap((p) => p.markerProblems)).toEqual([]);
  });

  describe.each(runnableFiles)('%s', (file) => {
    it.each(runnable.filter((block) => block.file === file).map((block) => [block.line, block]))(
      'the block at line %i runs as shown',
      async (_line, block) => {
        startRuns();
        const run = await runs.get(block)!;
        expect(run.failure, `${block.file}:${block.line}\n${run.transcript}`).toBeUndefined();
      },
    );
  });
});

describe('what the docs name exists', () => {
  it('every relative link names a file, and a heading of it when it has #anchor', () => {
    const broken: string[] = [];
    for (const file of allDocs) {
      readFileSync(join(repoRoot, file), 'utf8')
        .split('\n')
        .forEach((line, i) => {
          for (const m of line.matchAll(/\]\(([^)\s]+)\)/g)) {
            const target = m[1]!;
            if (/^[a-z]+:/.test(target)) continue;
            const [path, anchor] = target.split('#') as [string, string | undefined];
            const resolved = path === '' ? file : normalize(join(dirname(file), path));
            if (!existsSync(join(repoRoot, resolved))) broken.push(`${file}:${i + 1}: ${target}`);
            else if (anchor !== undefined && resolved.endsWith('.md')) {
              if (!headingAnchors(resolved).has(anchor)) broken.push(`${file}:${i + 1}: ${target}`);
            }
          }
        });
    }
    expect(broken).toEqual([]);
  });

  it('every `heaphook <command> --option` shown is a command and an option of the CLI', async () => {
    const options = await cliOptions();
    const unknown: string[] = [];
    for (const file of allDocs) {
      const text = readFileSync(join(repoRoot, file), 'utf8');
      for (const { line, code } of commandLines(text)) {
        for (const m of code.matchAll(/(?:^|[\s(`"'$])heaphook\s+([a-z][\w-]*)(?=\s|$)(.*)/g)) {
          // A command with subcommands (`heaphook bench compare`): the subcommand's options.
          const sub = /^\s+([a-z][\w-]*)(?=\s|$)/.exec(m[2]!);
          const nested = sub !== null && options.has(`${m[1]!} ${sub[1]!}`);
          const command = nested ? `${m[1]!} ${sub[1]!}` : m[1]!;
          const rest = nested ? m[2]!.slice(sub[0].length) : m[2]!;
          const known = options.get(command);
          if (known === undefined) {
            unknown.push(`${file}:${line}: heaphook ${command}`);
            continue;
          }
          const own = rest.split(/\s--\s|\s--$|[|;&`)#]/)[0]!;
          for (const option of own.matchAll(/(?:^|\s)(--?[a-zA-Z][\w-]*)/g))
            if (!known.has(option[1]!))
              unknown.push(`${file}:${line}: heaphook ${command} ${option[1]}`);
        }
      }
    }
    expect(unknown).toEqual([]);
  });
});

/** GitHub's anchors of a Markdown file's headings. */
function headingAnchors(file: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of readFileSync(join(repoRoot, file), 'utf8').split('\n')) {
    if (/^ {0,3}(```|~~~)/.test(line)) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6}\s+(.*?)\s*$/.exec(line);
    if (!heading) continue;
    const base = heading[1]!
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

/** Commands as the docs show them: the lines of sh/bash/shell blocks, the `$ ` lines of console
 * blocks, and inline code that starts with `heaphook` or `npx heaphook`. */
function commandLines(text: string): { line: number; code: string }[] {
  const out: { line: number; code: string }[] = [];
  const lines = text.split('\n');
  let fence: string | undefined;
  lines.forEach((line, i) => {
    const open = /^ {0,3}(```|~~~)\s*(\S*)/.exec(line);
    if (open) {
      fence = fence === undefined ? open[2]! || 'plain' : undefined;
      return;
    }
    if (fence === 'console') {
      if (line.startsWith('$ ')) out.push({ line: i + 1, code: line.slice(2) });
    } else if (fence !== undefined) {
      if (['sh', 'bash', 'shell', 'yaml'].includes(fence)) out.push({ line: i + 1, code: line });
    } else {
      for (const m of line.matchAll(/`((?:npx )?heaphook [^`]+)`/g))
        out.push({ line: i + 1, code: m[1]! });
    }
  });
  return out;
}

/** Each subcommand of the workspace's `heaphook` and the options its --help lists (asked once). */
let cliOptionsAsked: Promise<Map<string, Set<string>>> | undefined;
function cliOptions(): Promise<Map<string, Set<string>>> {
  cliOptionsAsked ??= askCliOptions();
  return cliOptionsAsked;
}

async function askCliOptions(): Promise<Map<string, Set<string>>> {
  const help = (args: string[]): Promise<string> =>
    new Promise((resolve, reject) =>
      execFile(
        process.execPath,
        [heaphookBin, ...args],
        { cwd: repoRoot, env: childEnv() },
        (error, stdout, stderr) =>
          error ? reject(new Error(`heaphook ${args.join(' ')}: ${stderr}`)) : resolve(stdout),
      ),
    );
  const commands = [...(await help(['--help'])).matchAll(/^ {2}([a-z][\w-]*)[ [<]/gm)]
    .map((m) => m[1]!)
    .filter((name) => name !== 'help');
  const topHelps = await Promise.all(commands.map((command) => help([command, '--help'])));
  // The subcommands of a command that has them (`bench compare`), listed after "Commands:".
  const nested = commands.flatMap((command, k) => {
    const listed = topHelps[k]!.split(/^Commands:$/m)[1] ?? '';
    return [...listed.matchAll(/^ {2}([a-z][\w-]*)[ [<]/gm)]
      .map((m) => m[1]!)
      .filter((name) => name !== 'help')
      .map((name) => `${command} ${name}`);
  });
  const nestedHelps = await Promise.all(
    nested.map((command) => help([...command.split(' '), '--help'])),
  );
  const helps = [...topHelps, ...nestedHelps];
  const options = new Map<string, Set<string>>();
  [...commands, ...nested].forEach((command, k) => {
    const listed = new Set(['-h', '--help']);
    for (const m of helps[k]!.matchAll(/^ {2}(-\w)?(?:, )?(--[\w-]+)?/gm)) {
      if (m[1]) listed.add(m[1]);
      if (m[2]) listed.add(m[2]);
    }
    options.set(command, listed);
  });
  return options;
}

describe('the comparison of shown output with a real run', () => {
  it('lets numbers and their units vary but not a zero, and `...` stand for anything', () => {
    const real = 'peak heap: 2.28 MiB (2,391,342 bytes) at 510.2 ms\ngrew 0 time(s)\n';
    expect(
      findMissingLine(['peak heap: 8.05 MiB (8,445,450 bytes) at 448.9 ms'], real, new Map()),
    ).toBeUndefined();
    expect(findMissingLine(['peak heap: 878 KiB ...'], real, new Map())).toBeUndefined();
    expect(findMissingLine(['grew 0 time(s)'], real, new Map())).toBeUndefined();
    expect(findMissingLine(['grew 1 time(s)'], 'grew 0 time(s)', new Map())).toBe('grew 1 time(s)');
    expect(findMissingLine(['grew 0 time(s)'], 'grew 2 time(s)', new Map())).toBe('grew 0 time(s)');
  });

  it('wants the shown lines in order, the others left out', () => {
    const real = 'a 1\nb 2\nc 3\n';
    expect(findMissingLine(['a 9', '...', 'c 9'], real, new Map())).toBeUndefined();
    expect(findMissingLine(['c 9', 'a 9'], real, new Map())).toBe('a 9');
  });

  it('binds a shown pid or size to the real one, for the output and the commands after it', () => {
    const bindings = new Map<string, string>();
    expect(
      findMissingLine(
        ['heaphook record: the program is traces/heaplog.26851.log, pid 26851'],
        'heaphook record: the program is traces/heaplog.19469.log, pid 19469',
        bindings,
      ),
    ).toBeUndefined();
    expect(bindings).toEqual(new Map([['26851', '19469']]));
    expect(applyBindings('npx heaphook report traces/heaplog.26851.log', bindings)).toBe(
      'npx heaphook report traces/heaplog.19469.log',
    );
    expect(findMissingLine(['pid 26851'], 'pid 4242', bindings)).toBe('pid 26851');
    expect(findMissingLine(['pid 26851 heaplog.26851.log'], 'pid 1 heaplog.2.log', new Map())).toBe(
      'pid 26851 heaplog.26851.log',
    );
  });
});

/**
 * The `heaphook` command. Core subcommands: list, path, run, doctor. Backend packages add their own
 * (record, report, recommend ...) by naming modules in their package.json's
 * `heaphook.commands`; each module exports `register(program: Command): void`.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { Command, CommanderError, Help, type Option } from 'commander';

import { findHeaphookPackages, libraryPath, listBackends, type CommandEntry } from './backends.js';
import { collectList, parseEnvAssignment } from './cli-options.js';
import { formatChecks, runDoctor } from './doctor.js';
import { describeFileSystemError, EXIT_USAGE, HeaphookError } from './errors.js';
import { terminalText } from './encode.js';
import { formatBackendList } from './list-format.js';
import { PLATFORM_ARCHES } from './native-files.js';
import { exitStatusOf, spawnWith } from './preload.js';

/** A module contributing subcommands. */
export interface CommandModule {
  register(program: Command): void;
}

/** The version of @heaphook/core (the CLI's package), from its package.json. */
function coreVersion(): string {
  const packageJson = resolve(dirname(fileURLToPath(import.meta.url)), '..', 'package.json');
  return (JSON.parse(readFileSync(packageJson, 'utf8')) as { version: string }).version;
}

const plainHelp = new Help();

/**
 * An option's help text, without the "(default: [])" or "(default: {})" that commander appends
 * for the empty starting value of a repeatable option: it says nothing to the reader. Set on
 * the root program before any subcommand is added, so contributed commands inherit it.
 */
function optionDescriptionWithoutEmptyDefault(option: Option): string {
  const value: unknown = option.defaultValue;
  const empty =
    (Array.isArray(value) && value.length === 0) ||
    (typeof value === 'object' &&
      value !== null &&
      !Array.isArray(value) &&
      Object.keys(value).length === 0);
  if (!empty) return plainHelp.optionDescription(option);
  const shown = Object.create(option) as Option;
  shown.defaultValue = undefined;
  return plainHelp.optionDescription(shown);
}

/** An --arch value: one of the architectures heaphook ships (Node's names). */
function checkArch(value: string): string {
  if (!(PLATFORM_ARCHES as readonly string[]).includes(value))
    throw new HeaphookError(
      `--arch ${value}: give one of ${PLATFORM_ARCHES.join(', ')} (Node's names: x64 is x86-64, arm64 is aarch64)`,
    );
  return value;
}

/** `run --agent SOCKET`: the agent's client (libheaphook_agent.so, from @heaphook/agent) goes
 * first in LD_PRELOAD, so it reports the heap of the backends after it. */
export function withAgent(
  backends: readonly string[],
  env: Record<string, string>,
  socket: string | undefined,
): { backends: string[]; env: Record<string, string> } {
  if (socket === undefined) return { backends: [...backends], env };
  return {
    backends: ['agent', ...backends.filter((b) => b !== 'agent')],
    env: { ...env, HEAPHOOK_AGENT: `unix:${resolve(socket)}` },
  };
}

export function buildProgram(): Command {
  const program = new Command('heaphook')
    .description('Replace or observe the heap of any Linux program without recompiling it.')
    .enablePositionalOptions()
    .version(`heaphook ${coreVersion()}`, '-V, --version', 'print the version and exit')
    .configureHelp({ optionDescription: optionDescriptionWithoutEmptyDefault })
    .showHelpAfterError()
    .exitOverride();

  program
    .command('list')
    .description('list the installed backends and their preload libraries')
    .option('--json', 'print JSON instead of a table')
    .action((options: { json?: boolean }) => {
      const backends = listBackends();
      if (options.json === true) {
        process.stdout.write(`${JSON.stringify(backends, null, 2)}\n`);
        return;
      }
      process.stdout.write(formatBackendList(backends));
    });

  program
    .command('path')
    .description("print the absolute path of a backend's preload library")
    .argument('<backend>', 'backend name, e.g. tlsf')
    .option(
      '--arch <arch>',
      `the library for another machine's architecture (${PLATFORM_ARCHES.join(', ')}), to copy there or run under emulation`,
      (value: string) => checkArch(value),
    )
    .action((backend: string, options: { arch?: string }) => {
      process.stdout.write(
        `${libraryPath(backend, options.arch !== undefined ? { arch: options.arch } : {})}\n`,
      );
    });

  program
    .command('run')
    .description('run a command with backends preloaded and pass its exit status through')
    .requiredOption(
      '-b, --backend <name>',
      'backend to preload (repeat or comma-separate to stack; first is outermost)',
      collectList,
      [],
    )
    .option(
      '-e, --env <KEY=VALUE>',
      'set an environment variable for the command (repeatable)',
      parseEnvAssignment,
      {},
    )
    .option(
      '--agent <socket>',
      "report to `heaphook agent` at this socket (preloads the agent's client ahead of the backends)",
    )
    .argument('<command>', 'the program to run')
    .argument('[args...]', 'its arguments (put -- before the command)')
    .passThroughOptions()
    .action(
      async (
        command: string,
        args: string[],
        options: { backend: string[]; env: Record<string, string>; agent?: string },
      ) => {
        const { backends, env } = withAgent(options.backend, options.env, options.agent);
        const child = spawnWith(backends, command, args, { env });
        const forward = (signal: NodeJS.Signals): void => {
          child.kill(signal);
        };
        for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, forward);
        const code = await new Promise<number>((resolvePromise) => {
          child.on('error', (error: NodeJS.ErrnoException) => {
            process.stderr.write(
              `heaphook: cannot run ${terminalText(`${command}: ${error.message}`)}\n`,
            );
            resolvePromise(error.code === 'ENOENT' ? 127 : 126);
          });
          child.on('close', (status, signal) => resolvePromise(exitStatusOf(status, signal)));
        });
        process.exitCode = code;
      },
    );

  program
    .command('doctor')
    .description(
      'check that this machine can run heaphook: platform, glibc, each backend preloaded into a probe, and the programs named',
    )
    .argument(
      '[programs...]',
      'programs to check for whether LD_PRELOAD reaches them (setuid, static, scripts)',
    )
    .option('--json', 'print the checks as JSON')
    .action((programs: string[], options: { json?: boolean }) => {
      const checks = runDoctor({ programs });
      process.stdout.write(
        options.json === true ? `${JSON.stringify(checks, null, 2)}\n` : formatChecks(checks),
      );
      process.exitCode = checks.some((c) => c.status === 'fail') ? 1 : 0;
    });

  return program;
}

/** The module of a `heaphook.commands` entry, and the subcommands it declares (none: a bare
 * path, which may register any). */
function commandEntry(entry: CommandEntry): { module: string; names: readonly string[] } {
  return typeof entry === 'string' ? { module: entry, names: [] } : entry;
}

/**
 * Adds the subcommands that installed packages declare in `heaphook.commands`: with `wanted`
 * (the subcommand being run), only the modules that can register it, so running one imports
 * neither the other packages nor their implementations; without it (help, an unknown name),
 * every module, in the order `heaphook --help` lists them.
 * Returns one line per module that could not be loaded (usually: its package is not built);
 * they are shown only when the user asks for a command nobody registered, so an unbuilt
 * package does not clutter the output of commands that work.
 */
export async function registerContributedCommands(
  program: Command,
  wanted?: string,
): Promise<string[]> {
  const modules = findHeaphookPackages().flatMap((record) =>
    (record.heaphook.commands ?? []).map((entry) => ({ record, ...commandEntry(entry) })),
  );
  const declared = wanted !== undefined && modules.some((m) => m.names.includes(wanted));
  const unavailable: string[] = [];
  for (const { record, module, names } of modules) {
    if (declared && names.length > 0 && !names.includes(wanted)) continue;
    const url = pathToFileURL(resolve(record.dir, module)).href;
    let contributed: Partial<CommandModule>;
    try {
      contributed = (await import(url)) as Partial<CommandModule>;
    } catch (error) {
      unavailable.push(
        `the commands of ${record.name} are not available (${(error as Error).message}); ` +
          `build them with "npx nx build ${record.nxProject}"`,
      );
      continue;
    }
    contributed.register?.(program);
  }
  return unavailable;
}

/** `heaphook <subcommand>` when argv names one (the prefix of its error lines), else `heaphook`. */
function subcommandOf(program: Command, argv: readonly string[]): string {
  const name = argv[2];
  return program.commands.some((c) => c.name() === name) ? `heaphook ${name}` : 'heaphook';
}

/**
 * Runs the `heaphook` CLI on `argv` (process.argv's shape: node, the script, then the words) and
 * resolves to its exit status; every error of every command becomes a line and a status here.
 * Exported as `runCli` for aliases such as `heaphook-bench` (`heaphook bench`).
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = buildProgram();
  // The core's own commands need no package's; another name loads the modules declaring it.
  const name = argv[2];
  const core = program.commands.some((c) => c.name() === name);
  const unavailable = core ? [] : await registerContributedCommands(program, name);
  try {
    await program.parseAsync([...argv]);
    return typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (error) {
    if (error instanceof CommanderError) {
      if (error.code === 'commander.unknownCommand') {
        for (const line of unavailable) process.stderr.write(`heaphook: ${line}\n`);
      }
      return error.exitCode;
    }
    const who = subcommandOf(program, argv);
    if (error instanceof HeaphookError) {
      process.stderr.write(
        `${error.namesCommand ? who : 'heaphook'}: ${terminalText(error.message)}\n`,
      );
      return error.exitStatus;
    }
    // A path that does not work is the user's to fix, not a bug: one line, no stack trace.
    const fsProblem = describeFileSystemError(error);
    if (fsProblem !== undefined) {
      process.stderr.write(`${who}: ${terminalText(fsProblem)}\n`);
      return EXIT_USAGE;
    }
    throw error;
  }
}

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { libraryPath } from '../../src/index.js';
import {
  arm64BuildMissing,
  arm64ReleaseDir,
  isAarch64Elf,
  skipOutsideCI,
} from '../../src/testing.js';

const bin = fileURLToPath(new URL('../../bin/heaphook.js', import.meta.url));

function heaphook(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  return heaphookIn(process.cwd(), ...args);
}

function heaphookIn(
  cwd: string,
  ...args: string[]
): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8', cwd });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('the heaphook command', () => {
  it('path prints the absolute library path and nothing else', () => {
    const result = heaphook('path', 'example');
    expect(result.status).toBe(0);
    expect(result.stdout).toBe(`${libraryPath('example')}\n`);
    expect(result.stdout).toMatch(/^\/.*libheaphook_example\.so\n$/);
  });

  it.skipIf(
    skipOutsideCI(
      arm64BuildMissing(fileURLToPath(new URL('../..', import.meta.url)), [
        'libheaphook_example.so',
      ]),
    ),
  )('path --arch arm64 gives the arm64 library (here: the cross build)', () => {
    const result = heaphook('path', 'example', '--arch', 'arm64');
    expect(result.stderr).toBe('');
    const expected = join(
      arm64ReleaseDir(fileURLToPath(new URL('../..', import.meta.url))),
      'libheaphook_example.so',
    );
    expect(result.stdout).toBe(`${expected}\n`);
    expect(isAarch64Elf(expected)).toBe(true);
  });

  it('path --arch with an architecture heaphook does not ship is a usage error', () => {
    const result = heaphook('path', 'example', '--arch', 'riscv64');
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/--arch riscv64: give one of x64, arm64/);
    expect(result.stdout).toBe('');
  });

  it('list shows a header, then each backend with its package and library', () => {
    const result = heaphook('list');
    expect(result.status).toBe(0);
    expect(result.stdout.split('\n')[0]).toMatch(/^BACKEND\s+PACKAGE\s+LIBRARY$/);
    expect(result.stdout).toMatch(/^example\s+@heaphook\/core\s+\/\S+libheaphook_example\.so$/m);
    const json = JSON.parse(heaphook('list', '--json').stdout) as Array<{
      name: string;
      built: boolean;
    }>;
    expect(json.find((b) => b.name === 'example')?.built).toBe(true);
  });

  it('list puts the AIX emulation apart from the Linux heap backends', () => {
    const { stdout } = heaphook('list');
    const [backends = '', emulations = ''] = stdout.split(/\n\nemulations[^\n]*\n/);
    expect(backends).toMatch(/^tlsf\s/m);
    expect(backends).not.toMatch(/^aix-plugin\s/m);
    expect(emulations).toMatch(/^aix-plugin\s+@heaphook\/aix-plugin\s+\/\S+\.so\s+\(emulates AIX/m);
    const json = JSON.parse(heaphook('list', '--json').stdout) as Array<{
      name: string;
      emulates?: string;
    }>;
    expect(json.find((b) => b.name === 'aix-plugin')?.emulates).toMatch(/AIX/);
    expect(json.find((b) => b.name === 'tlsf')?.emulates).toBeUndefined();
  });

  it('--version prints the version of the CLI package', () => {
    const result = heaphook('--version');
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^heaphook \d+\.\d+\.\d+\n$/);
  });

  it('no help text shows the empty starting value of a repeatable option', () => {
    const commands = [
      'list',
      'path',
      'run',
      'doctor',
      'record',
      'dump',
      'recommend',
      'report',
      'check',
      'bench compare',
    ];
    for (const command of commands) {
      const help = heaphook(...command.split(' '), '--help');
      expect(help.status, `${command} --help`).toBe(0);
      expect(help.stdout, `${command} --help`).not.toMatch(/\(default: (\[\]|\{\})\)/);
    }
    // The repeatable options are still described.
    expect(heaphook('run', '--help').stdout).toMatch(/-b, --backend <name>/);
  });

  it('ends quietly with status 0 when its reader closes the pipe early (heaphook ... | head)', () => {
    // `true` exits long before node has started, so every write meets a closed pipe.
    const result = spawnSync(
      'bash',
      ['-c', 'set -o pipefail; "$@" | true', 'sh', process.execPath, bin, 'list', '--json'],
      { encoding: 'utf8' },
    );
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('run preloads the backend, passes --env and the exit status through', () => {
    const result = heaphook(
      'run',
      '-b',
      'example',
      '--env',
      'GREETING=hi',
      '--',
      'sh',
      '-c',
      'echo "$LD_PRELOAD $GREETING"; exit 3',
    );
    expect(result.status).toBe(3);
    expect(result.stdout).toBe(`${libraryPath('example')} hi\n`);
  });

  it('run reports death by a signal as 128 + the signal number', () => {
    const result = heaphook('run', '-b', 'example', '--', 'sh', '-c', 'kill -TERM $$');
    expect(result.status).toBe(143);
  });

  it('run --agent puts the agent client first in LD_PRELOAD and names its socket', () => {
    const result = heaphook(
      'run',
      '--agent',
      'agent.sock',
      '-b',
      'example',
      '--',
      'sh',
      '-c',
      'echo "$HEAPHOOK_AGENT"; echo "$LD_PRELOAD"',
    );
    expect(result.status).toBe(0);
    const [agent, preload] = result.stdout.split('\n');
    expect(agent).toBe(`unix:${resolve('agent.sock')}`);
    expect(preload).toMatch(/libheaphook_agent\.so[: ].*libheaphook_example\.so$/);
  });

  it('run leaves options after the command to the command', () => {
    const result = heaphook('run', '-b', 'example', '--', 'echo', '-b', '--env');
    expect(result.stdout).toBe('-b --env\n');
  });

  it('an unknown backend is one clear line and status 2', () => {
    const result = heaphook('run', '-b', 'nope', '--', 'true');
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(
      /^heaphook: no heaphook backend named "nope" \(installed: .*example.*\)\..*\n$/,
    );
  });

  it('a missing command exits 127 like a shell', () => {
    const result = heaphook('run', '-b', 'example', '--', '/nonexistent/program');
    expect(result.status).toBe(127);
    expect(result.stderr).toMatch(/cannot run \/nonexistent\/program/);
  });

  it('a bad --env value names the expected form', () => {
    const result = heaphook('run', '-b', 'example', '--env', 'NOVALUE', '--', 'true');
    expect(result.status).toBe(2);
    expect(result.stderr).toMatch(/--env expects KEY=VALUE, got "NOVALUE"/);
  });

  it('commands of an unbuilt package are named, with the build command, only when asked for', () => {
    const root = mkdtempSync(join(tmpdir(), 'heaphook-commands-'));
    try {
      const pkg = join(root, 'node_modules', '@acme', 'tracer');
      mkdirSync(pkg, { recursive: true });
      writeFileSync(
        join(pkg, 'package.json'),
        JSON.stringify({ name: '@acme/tracer', heaphook: { commands: ['dist/commands.js'] } }),
      );
      expect(heaphookIn(root, 'path', 'example').stderr).toBe('');
      const unknown = heaphookIn(root, 'trace');
      expect(unknown.status).not.toBe(0);
      expect(unknown.stderr).toMatch(/unknown command 'trace'/);
      expect(unknown.stderr).toMatch(
        /commands of @acme\/tracer are not available .*npx nx build tracer/,
      );
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('a subcommand loads only the module that declares it; help lists every one', () => {
    const root = mkdtempSync(join(tmpdir(), 'heaphook-lazy-'));
    try {
      const pkg = join(root, 'node_modules', '@acme', 'tools');
      mkdirSync(pkg, { recursive: true });
      const commands = ['alpha', 'beta'].map((name) => {
        // Each module says on stderr when it is imported, and its command says it ran.
        writeFileSync(
          join(pkg, `${name}.mjs`),
          `process.stderr.write('${name} imported\\n');\n` +
            `export function register(program) {\n` +
            `  program.command('${name}').description('the ${name} command')\n` +
            `    .action(() => process.stdout.write('${name} ran\\n'));\n}\n`,
        );
        return { module: `${name}.mjs`, names: [name] };
      });
      writeFileSync(
        join(pkg, 'package.json'),
        JSON.stringify({ name: '@acme/tools', heaphook: { commands } }),
      );
      const beta = heaphookIn(root, 'beta');
      expect(beta).toMatchObject({ status: 0, stdout: 'beta ran\n', stderr: 'beta imported\n' });
      expect(heaphookIn(root, 'path', 'example').stderr).toBe('');
      const help = heaphookIn(root, '--help');
      expect(help.stderr).toBe('alpha imported\nbeta imported\n');
      expect(help.stdout).toMatch(/alpha +the alpha command\n +beta +the beta command\n/);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

// GOT relocation patching (native/reloc_object.c and reloc_patch.c): a test program and a
// library, both built here with every combination of full RELRO / no RELRO (lazy binding), PIE / non-PIE and PLT / -fno-plt,
// patch getpid and a function of the library, in the program, the library and a library
// dlopen'ed after the patch, then undo (test/native/reloc/reloc_main.c lists the checks).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { run } from '../helpers/native.js';

const coreDir = fileURLToPath(new URL('../..', import.meta.url));
const sources = join(coreDir, 'test', 'native', 'reloc');
let work: string;

beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'heaphook-reloc-'));
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

function gcc(args: string[]): void {
  const result = run('gcc', args, { cwd: work });
  expect(result.status, `gcc ${args.join(' ')}\n${result.stderr}`).toBe(0);
}

const relros = {
  'full RELRO': ['-Wl,-z,relro,-z,now'],
  'no RELRO, lazy': ['-Wl,-z,norelro,-z,lazy'],
};
const pies = { PIE: ['-fPIE', '-pie'], 'non-PIE': ['-fno-pie', '-no-pie'] };
const plts = { PLT: [], '-fno-plt': ['-fno-plt'] };

describe('GOT patching matrix', () => {
  for (const [relroName, relro] of Object.entries(relros)) {
    for (const [pieName, pie] of Object.entries(pies)) {
      for (const [pltName, plt] of Object.entries(plts)) {
        const name = `${relroName}, ${pieName}, ${pltName}`;
        it(name, () => {
          const dir = mkdtempSync(join(work, 'case-'));
          const common = ['-O2', '-g', ...relro, ...plt];
          gcc([
            ...common,
            '-fPIC',
            '-shared',
            '-o',
            join(dir, 'libreloc_lib.so'),
            join(sources, 'reloc_lib.c'),
          ]);
          gcc([
            ...common,
            '-fPIC',
            '-shared',
            '-o',
            join(dir, 'libreloc_late.so'),
            join(sources, 'reloc_late.c'),
          ]);
          gcc([
            ...common,
            ...pie,
            '-D_GNU_SOURCE',
            '-I',
            join(coreDir, 'include'),
            '-o',
            join(dir, 'reloc_main'),
            join(sources, 'reloc_main.c'),
            join(coreDir, 'native', 'reloc_object.c'),
            join(coreDir, 'native', 'reloc_patch.c'),
            `-L${dir}`,
            '-lreloc_lib',
            '-Wl,-rpath,$ORIGIN',
            '-ldl',
            '-lpthread',
          ]);
          const result = run(join(dir, 'reloc_main'), [join(dir, 'libreloc_late.so')]);
          expect(result.stdout).toMatch(/reloc: \d+ checks, 0 failed/);
          expect(result.status, result.stdout + result.stderr).toBe(0);
        });
      }
    }
  }
});

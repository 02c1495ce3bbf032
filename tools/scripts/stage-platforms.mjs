#!/usr/bin/env node
// `npx nx run tools:stage-platforms`: the platform packages, filled from the builds, ready for
// `npm pack` / `npm publish`. For every publishable package (one whose package.json lists
// `heaphook.nativeFiles`) and architecture, <out>/<short>-linux-<arch>-gnu/ holds the package's
// native files for that architecture, its package.json (the package's name with
// -linux-<arch>-gnu, its version, licence and engines; os, cpu and libc set so that npm installs
// it only on that platform), LICENSE and README.md. The packages list them in their
// optionalDependencies; @heaphook/core's nativeFile finds the files in them.
//
// Sources: build/Release for this machine's architecture (`npx nx run-many -t build`),
// build-<arch>/Release for a cross build (`npx nx run-many -t build-arm64`). Node addons (.node)
// are built by cmake-js for this machine's Node only, so another architecture's package has
// none. Every ELF file is checked to be for its architecture. A file the build has not made is
// an error naming the build command.
//
//   node tools/scripts/stage-platforms.mjs [--out DIR] [--arch x64,arm64]
//
// Default --out: dist/platforms at the repository's root (ignored by git, never checked in).
import {
  closeSync,
  cpSync,
  existsSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

import { buildOutputDir, PLATFORM_ARCHES, platformPackageName } from '@heaphook/core';

const root = fileURLToPath(new URL('../..', import.meta.url));
const { values } = parseArgs({
  options: {
    out: { type: 'string', default: join(root, 'dist', 'platforms') },
    arch: { type: 'string', default: PLATFORM_ARCHES.join(',') },
  },
});
const outDir = resolve(values.out);
const arches = values.arch.split(',').filter((a) => a !== '');
for (const arch of arches) {
  if (!PLATFORM_ARCHES.includes(arch)) {
    console.error(`stage-platforms: --arch ${arch}: give some of ${PLATFORM_ARCHES.join(',')}`);
    process.exit(2);
  }
}

/** ELF e_machine of each architecture (Node's names). */
const ELF_MACHINE = { x64: 62, arm64: 183 };

/** The file's ELF e_machine, or undefined when it is not an ELF file (an ar archive). */
function elfMachine(path) {
  const header = Buffer.alloc(20);
  const fd = openSync(path, 'r');
  try {
    if (readSync(fd, header, 0, 20, 0) < 20) return undefined;
  } finally {
    closeSync(fd);
  }
  return header.readUInt32BE(0) === 0x7f454c46 ? header.readUInt16LE(18) : undefined;
}

const packages = readdirSync(join(root, 'packages'))
  .map((name) => join(root, 'packages', name))
  .filter((dir) => existsSync(join(dir, 'package.json')))
  .map((dir) => ({ dir, manifest: JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) }))
  .filter(
    ({ manifest }) => manifest.private !== true && Array.isArray(manifest.heaphook?.nativeFiles),
  );

const problems = [];
for (const { dir, manifest } of packages) {
  const short = manifest.name.replace(/^@[^/]+\//, '');
  const nxProject = manifest.nx?.name ?? short;
  for (const arch of arches) {
    const name = platformPackageName(manifest.name, arch);
    if (manifest.optionalDependencies?.[name] !== manifest.version) {
      problems.push(
        `${manifest.name}: optionalDependencies must list ${name} at ${manifest.version}`,
      );
      continue;
    }
    const source = buildOutputDir(dir, arch);
    const files = manifest.heaphook.nativeFiles.filter(
      (file) => arch === process.arch || !file.endsWith('.node'),
    );
    const build =
      arch === process.arch ? `npx nx build ${nxProject}` : `npx nx run ${nxProject}:build-${arch}`;
    const missing = files.filter((file) => !existsSync(join(source, file)));
    if (missing.length > 0) {
      problems.push(`${name}: ${missing.join(', ')} not in ${source}: ${build}`);
      continue;
    }
    const wrong = files.filter((file) => {
      const machine = elfMachine(join(source, file));
      return machine !== undefined && machine !== ELF_MACHINE[arch];
    });
    if (wrong.length > 0) {
      problems.push(`${name}: ${wrong.join(', ')} in ${source} not built for ${arch}: ${build}`);
      continue;
    }

    const target = join(outDir, `${short}-linux-${arch}-gnu`);
    rmSync(target, { recursive: true, force: true });
    mkdirSync(target, { recursive: true });
    let bytes = 0;
    for (const file of files) {
      mkdirSync(dirname(join(target, file)), { recursive: true });
      cpSync(join(source, file), join(target, file)); // keeps the mode: executables stay so
      bytes += statSync(join(target, file)).size;
    }
    cpSync(join(dir, 'LICENSE'), join(target, 'LICENSE'));
    const platformManifest = {
      name,
      version: manifest.version,
      description: `The prebuilt native files of ${manifest.name} for Linux ${arch} with glibc. npm installs this package with ${manifest.name} on that platform; it is not used alone.`,
      license: manifest.license,
      engines: manifest.engines,
      os: ['linux'],
      cpu: [arch],
      libc: ['glibc'],
      files,
    };
    writeFileSync(join(target, 'package.json'), `${JSON.stringify(platformManifest, null, 2)}\n`);
    const addonsNote =
      arch === process.arch || !manifest.heaphook.nativeFiles.some((f) => f.endsWith('.node'))
        ? ''
        : `\nThe Node addons (${manifest.heaphook.nativeFiles.filter((f) => f.endsWith('.node')).join(', ')}) are not in it: they are built only for the Node of the build machine (linux-${process.arch}).\n`;
    writeFileSync(
      join(target, 'README.md'),
      `# ${name}\n\nThe prebuilt native files of [${manifest.name}](https://www.npmjs.com/package/${manifest.name}) for Linux ${arch} with glibc: ${files.join(', ')}.\n\nnpm installs it with ${manifest.name} (an optional dependency whose \`os\`, \`cpu\` and \`libc\` match this platform only); \`heaphook path\` and the package's API find the files in it.\n${addonsNote}`,
    );
    console.log(`${name}: ${files.length} files, ${bytes} bytes -> ${target}`);
  }
}
if (problems.length > 0) {
  for (const problem of problems) console.error(`stage-platforms: ${problem}`);
  process.exit(1);
}

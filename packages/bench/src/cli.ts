#!/usr/bin/env node
/**
 * heaphook-bench: an alias of `heaphook bench` (src/bench/command.ts), kept for
 * `nx run bench:compare` and the package's scripts. It runs the same code through the core's
 * CLI, so its options, help and exit statuses are `heaphook bench`'s.
 */
import { runCli } from '@heaphook/core';

const [node = process.execPath, self = 'heaphook-bench', ...args] = process.argv;
process.exitCode = await runCli([node, self, 'bench', ...args]);

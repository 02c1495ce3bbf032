/**
 * The table of event fields (native/format/fields.h) drives the writer's encoder and the C
 * decoder: a field added to the table alone (test/native/synthetic_field.h, force-included into
 * both) is written and read back with the values written, and so is every declared field, on
 * 2,000 events of every operation (test/native/field_roundtrip.c). test/unit/roundtrip.test.ts
 * holds the same for the TypeScript decoder, and fails when a declared field has no round trip.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import * as format from '../../src/decode/format.generated.js';
import { release } from '../helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'heaphook-fields-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('a field added through the table makes the round trip (unit)', () => {
  it('encodes and decodes a synthetic field and every declared one with the values written', () => {
    const run = spawnSync(join(release, 'hh_test_field_roundtrip'), [join(dir, 'fields.log')], {
      encoding: 'utf8',
    });
    expect(run.stderr).toBe('');
    expect(run.stdout).toMatch(/^\d+ events, \d+ fields, \d+ synthetic values\n$/);
    expect(run.status).toBe(0);
    const [events, fields, synthetic] = run.stdout.match(/\d+/g)!.map(Number);
    expect(events).toBeGreaterThan(1900);
    // every call carries the synthetic field; realloc_done (1 in 12 events here) none
    expect(synthetic).toBe(events! - Math.floor(events! / 12));
    // and more than the table's own fields per event were compared: the synthetic one too
    expect(fields).toBeGreaterThan(synthetic! + 3 * (events! - synthetic!));
    expect(format.EVENT_FIELDS.some((f) => (f.name as string) === 'synthetic')).toBe(false);
  });
});

describe('the size classes list 128 recent frees (format version 3, unit)', () => {
  it('gives the C decoder back blocks coded from deep in their class list', () => {
    // field_roundtrip.c's deep mode: 300 blocks of one size class allocated, freed in order and
    // allocated again at (i * 7) % 300, three rounds; every field of every event compared.
    const run = spawnSync(
      join(release, 'hh_test_field_roundtrip'),
      [join(dir, 'deep.log'), 'deep'],
      { encoding: 'utf8' },
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toBe('2700 events, 11700 fields, 2700 synthetic values\n');
    expect(run.status).toBe(0);
  });
});

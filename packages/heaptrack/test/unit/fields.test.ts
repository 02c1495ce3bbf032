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

/** field_roundtrip.c in one of its modes (none: every operation): its output; it must exit 0. */
function roundTrip(mode?: 'deep' | 'recent'): string {
  const args = [join(dir, `${mode ?? 'fields'}.log`), ...(mode ? [mode] : [])];
  const run = spawnSync(join(release, 'hh_test_field_roundtrip'), args, { encoding: 'utf8' });
  expect(run.stderr).toBe('');
  expect(run.status, run.stdout).toBe(0);
  return run.stdout;
}

describe('a field added through the table makes the round trip (unit)', () => {
  it('encodes and decodes a synthetic field and every declared one with the values written', () => {
    const out = roundTrip();
    expect(out).toMatch(/^\d+ events, \d+ fields, \d+ synthetic values\n$/);
    const [events, fields, synthetic] = out.match(/\d+/g)!.map(Number);
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
    expect(roundTrip('deep')).toBe('2700 events, 11700 fields, 2700 synthetic values\n');
  });
});

describe('the list of recent frees reaches 16,384 frees back (format version 4, unit)', () => {
  it('codes a block freed up to 16,384 frees before from the list, an older one explicitly, and decodes both', () => {
    // field_roundtrip.c's recent mode: 17,000 blocks of 24 bytes allocated and freed in order,
    // then allocated again as 40-byte blocks (another size class) at (i * 7) % 17,000.
    expect(roundTrip('recent')).toBe(
      '51000 events, 221000 fields, 51000 synthetic values\n' +
        // the last 16,384 freed from the list; the 616 freed before them, and the first
        // block of all, explicitly
        '16384 recent (16320 deeper than 64), 617 explicit\n',
    );
  });
});

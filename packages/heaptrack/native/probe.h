/*
 * probe.h — the rule shared by the tracer's open-addressing tables with linear probing and
 * backward-shift deletion (leaks/table.c's live-block table, the tables of the report pass in
 * analyze/store.h).
 */
#ifndef HH_PROBE_H
#define HH_PROBE_H

#include <stdbool.h>
#include <stdint.h>

/* Backward shift: may the entry in slot j, whose home slot is `home`, move into the hole? Not
 * when its home lies cyclically in (hole, j]: it would then sit before its home, where a
 * lookup starting there never finds it. */
static inline bool hh_probe_may_move(uint64_t hole, uint64_t j, uint64_t home) {
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    return !stays;
}

#endif

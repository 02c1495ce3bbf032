/*
 * ar_member.h — finding a member in an ar archive held in memory, as the emulation reads the
 * plug-in archive (MALLOCTYPE=user:<archive>.a) before it loads the member. No allocation, no
 * system call: the caller maps the file and gets back a pointer into the mapping.
 */
#ifndef HEAPHOOK_AIX_AR_MEMBER_H
#define HEAPHOOK_AIX_AR_MEMBER_H

#include <stddef.h>

/* What ar_find_member found. */
enum ar_result {
    AR_FOUND = 0,
    AR_NO_MEMBER = -1,      /* a valid archive without the member */
    AR_NOT_AN_ARCHIVE = -2, /* no "!<arch>\n" magic, or a header or size that breaks the format */
    AR_BIG_FORMAT = -3,     /* AIX's "<bigaf>\n" format, which only AIX's own loader reads */
};

typedef struct ar_member {
    const unsigned char *data; /* into the archive's bytes */
    size_t size;
} ar_member;

/*
 * Finds the member called want in a System V / GNU archive (names "name/", long names through
 * the "//" table as "/<offset>") or a BSD one ("#1/<length>", the name starting the data).
 * On AR_NO_MEMBER, names holds the members seen, separated by spaces (as many as fit in
 * names_cap, which must be at least 1), for the refusal message.
 */
int ar_find_member(const unsigned char *base, size_t size, const char *want, ar_member *out,
                   char *names, size_t names_cap);

#endif

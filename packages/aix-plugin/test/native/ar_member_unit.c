/*
 * The emulation's archive reader (native/ar_member.c) on its own: archives of every layout it
 * accepts (System V / GNU short names, GNU long names, BSD names), the ones it refuses (AIX's
 * big format, not an archive, broken headers, sizes past the end), and the list of members it
 * gives for the refusal message. Each archive is built here, byte by byte.
 * Prints one line per check and "<n> checks, <f> failed"; exits 1 when any failed.
 */
#include <stdio.h>
#include <string.h>

#include "ar_member.h"

#define ARCHIVE_CAP 4096
#define HEADER_LEN 60

typedef struct archive {
    unsigned char bytes[ARCHIVE_CAP];
    size_t len;
} archive;

static int checks, failed;

static void check(int ok, const char *what) {
    checks++;
    if (!ok) failed++;
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
}

static void start(archive *a, const char *magic) {
    a->len = strlen(magic);
    memcpy(a->bytes, magic, a->len);
}

/* One member: the 60-byte header (name field, size), the data, and the pad byte ar adds after
 * an odd-sized member. size_field lets a test write a size that differs from the data's. */
static void add_sized(archive *a, const char *name_field, const void *data, size_t len,
                      size_t size_field) {
    char header[HEADER_LEN + 1];
    snprintf(header, sizeof header, "%-16.16s%-12s%-6s%-6s%-8s%-10zu`\n", name_field, "0", "0", "0",
             "644", size_field);
    memcpy(a->bytes + a->len, header, HEADER_LEN);
    a->len += HEADER_LEN;
    memcpy(a->bytes + a->len, data, len);
    a->len += len;
    if (a->len & 1) a->bytes[a->len++] = '\n';
}

static void add(archive *a, const char *name_field, const char *data) {
    add_sized(a, name_field, data, strlen(data), strlen(data));
}

static int find(const archive *a, const char *want, ar_member *m, char *names, size_t cap) {
    return ar_find_member(a->bytes, a->len, want, m, names, cap);
}

static int is(const ar_member *m, const char *data) {
    return m->size == strlen(data) && memcmp(m->data, data, m->size) == 0;
}

int main(void) {
    archive a;
    ar_member m;
    char names[256];

    /* GNU / System V: "name/" headers; an odd-sized member is padded to an even offset. */
    start(&a, "!<arch>\n");
    add(&a, "a.o/", "odd");
    add(&a, "mem32.o/", "thirty-two");
    add(&a, "mem64.o/", "sixty-four");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_FOUND && is(&m, "sixty-four"),
          "GNU names: the member after an odd-sized one is found, its bytes exactly");
    check(find(&a, "mem32.o", &m, names, sizeof names) == AR_FOUND && is(&m, "thirty-two"),
          "GNU names: a member in the middle is found");
    check(find(&a, "mem64", &m, names, sizeof names) == AR_NO_MEMBER,
          "a prefix of a member's name is not that member");
    check(find(&a, "b.o", &m, names, sizeof names) == AR_NO_MEMBER &&
              strcmp(names, "a.o mem32.o mem64.o") == 0,
          "a missing member: AR_NO_MEMBER, and the members seen, in order");

    /* A name field of 16 characters padded with spaces, no '/': the System V spelling. */
    start(&a, "!<arch>\n");
    add(&a, "mem64.o", "spaces");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_FOUND && is(&m, "spaces"),
          "a space-padded name without '/' is read up to the padding");

    /* GNU long names: the "//" table, members named "/<offset into it>". */
    start(&a, "!<arch>\n");
    add(&a, "//", "a_member_name_longer_than_16.o/\nmem64.o/\n");
    add(&a, "/0", "long");
    add(&a, "/32", "short-through-table");
    check(find(&a, "a_member_name_longer_than_16.o", &m, names, sizeof names) == AR_FOUND &&
              is(&m, "long"),
          "GNU long names: a name longer than the header's 16 bytes, through the table");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_FOUND && is(&m, "short-through-table"),
          "GNU long names: a second offset into the table");
    check(find(&a, "x.o", &m, names, sizeof names) == AR_NO_MEMBER &&
              strcmp(names, "a_member_name_longer_than_16.o mem64.o") == 0,
          "GNU long names: the table itself is not listed as a member");

    /* "/<n>" with no table before it names nothing (and is not a crash). */
    start(&a, "!<arch>\n");
    add(&a, "/0", "orphan");
    add(&a, "mem64.o/", "after");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_FOUND && is(&m, "after"),
          "an offset name without a long-name table is skipped");

    /* BSD: "#1/<length>", the name at the start of the data, NUL-padded. */
    start(&a, "!<arch>\n");
    add(&a, "#1/7", "mem32.opayload32");
    add_sized(&a, "#1/8", "mem64.o\0payload64", 17, 17);
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_FOUND && is(&m, "payload64"),
          "BSD names: the name's NUL padding is dropped and the data starts after the name");
    check(find(&a, "mem32.o", &m, names, sizeof names) == AR_FOUND && is(&m, "payload32"),
          "BSD names: an unpadded name");

    /* Refusals. */
    start(&a, "<bigaf>\n");
    add(&a, "mem64.o/", "x");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_BIG_FORMAT,
          "AIX's big format is told apart from a file that is not an archive");
    start(&a, "\177ELF\2\1\1\0");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_NOT_AN_ARCHIVE,
          "an ELF object is not an archive");
    check(ar_find_member((const unsigned char *)"!<ar", 4, "mem64.o", &m, names, sizeof names) ==
              AR_NOT_AN_ARCHIVE,
          "a file shorter than the magic is not an archive");
    start(&a, "!<arch>\n");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_NO_MEMBER && names[0] == '\0',
          "an archive with no member has none of them, and lists none");
    start(&a, "!<arch>\n");
    add(&a, "mem64.o/", "data");
    a.bytes[8 + 58] = 'x';
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_NOT_AN_ARCHIVE,
          "a header without its terminator breaks the format");
    start(&a, "!<arch>\n");
    add_sized(&a, "mem64.o/", "short", 5, 500);
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_NOT_AN_ARCHIVE,
          "a member whose size runs past the end of the file breaks the format");
    start(&a, "!<arch>\n");
    add(&a, "#1/40", "mem64.o");
    check(find(&a, "mem64.o", &m, names, sizeof names) == AR_NOT_AN_ARCHIVE,
          "a BSD name longer than its member breaks the format");

    /* The list of names never overflows its buffer. */
    start(&a, "!<arch>\n");
    add(&a, "first.o/", "1");
    add(&a, "second.o/", "2");
    char small[12];
    memset(small, 'z', sizeof small);
    check(find(&a, "mem64.o", &m, small, sizeof small) == AR_NO_MEMBER &&
              strcmp(small, "first.o") == 0,
          "names that do not fit are left out, the list still terminated");

    printf("%d checks, %d failed\n", checks, failed);
    return failed ? 1 : 0;
}

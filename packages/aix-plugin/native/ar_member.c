/*
 * ar_member.c — a member of an ar archive in memory (ar_member.h). The emulation's only reader
 * of the plug-in archive; test/native/ar_member_unit.c checks it on archives of every layout.
 */
#include "ar_member.h"

#include <string.h>

static size_t parse_decimal(const char *text, size_t len) {
    size_t value = 0;
    for (size_t i = 0; i < len && text[i] >= '0' && text[i] <= '9'; i++) {
        value = value * 10 + (size_t)(text[i] - '0');
    }
    return value;
}

int ar_find_member(const unsigned char *base, size_t size, const char *want, ar_member *out,
                   char *names, size_t names_cap) {
    size_t names_len = 0;
    names[0] = '\0';
    if (size >= 8 && memcmp(base, "<bigaf>\n", 8) == 0) return AR_BIG_FORMAT;
    if (size < 8 || memcmp(base, "!<arch>\n", 8) != 0) return AR_NOT_AN_ARCHIVE;
    const char *long_names = NULL;
    size_t long_names_size = 0;
    size_t pos = 8;
    while (pos + 60 <= size) {
        const char *h = (const char *)base + pos;
        if (h[58] != '`' || h[59] != '\n') return AR_NOT_AN_ARCHIVE;
        size_t data_size = parse_decimal(h + 48, 10);
        const unsigned char *data = base + pos + 60;
        if (data_size > size - pos - 60) return AR_NOT_AN_ARCHIVE;
        char name[256];
        size_t name_len = 0;
        if (h[0] == '/' && h[1] == '/' && h[2] == ' ') { /* GNU long-name table */
            long_names = (const char *)data;
            long_names_size = data_size;
        } else if (h[0] == '/' && h[1] >= '0' && h[1] <= '9' && long_names) { /* "/123" */
            size_t off = parse_decimal(h + 1, 15);
            while (off + name_len < long_names_size && long_names[off + name_len] != '/' &&
                   long_names[off + name_len] != '\n' && name_len < sizeof name - 1) {
                name[name_len] = long_names[off + name_len];
                name_len++;
            }
        } else if (memcmp(h, "#1/", 3) == 0) { /* BSD: the name starts the data */
            size_t n = parse_decimal(h + 3, 13);
            if (n > data_size) return AR_NOT_AN_ARCHIVE;
            name_len = n < sizeof name - 1 ? n : sizeof name - 1;
            memcpy(name, data, name_len);
            while (name_len > 0 && name[name_len - 1] == '\0') name_len--;
            data += n;
            data_size -= n;
        } else if (h[0] != '/') { /* "name/" (System V / GNU) or "name   " */
            while (name_len < 16 && h[name_len] != '/' && h[name_len] != ' ') {
                name[name_len] = h[name_len];
                name_len++;
            }
        }
        if (name_len > 0) {
            name[name_len] = '\0';
            if (strcmp(name, want) == 0) {
                out->data = data;
                out->size = data_size;
                return AR_FOUND;
            }
            if (names_len + name_len + 3 < names_cap) {
                if (names_len > 0) names[names_len++] = ' ';
                memcpy(names + names_len, name, name_len + 1);
                names_len += name_len;
            }
        }
        pos += 60 + parse_decimal(h + 48, 10);
        pos += pos & 1;
    }
    return AR_NO_MEMBER;
}

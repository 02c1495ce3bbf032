// heaphook/utils.hpp — the small helpers tier4/heaphook's utils.hpp gives its allocators, with
// the same names and behaviour, header-only (nothing to add to a build): text formatting into a
// caller's buffer with no allocation, a write(2)-based stderr writer, and alignment arithmetic.
//
//   char line[128];
//   format(line, "pool grew by ", size_t(1) << 20, " bytes at ", ptr, "\n");
//   write_to_stderr("heap: ", used, " bytes used\n");   // one write(2), no stdio, no malloc
//
// format() accepts void * (written 0x + 16 hex digits), size_t (decimal) and const char *;
// format_as_csv_entry() the same, separated by ", " and ended by a newline. The buffer must be
// large enough: nothing is checked (write_to_stderr uses 1 KiB on the stack). For heaphook's own
// logger (levels, HEAPHOOK_LOG_FILE, printf-like formats) see heaphook/log.h.
#ifndef HEAPHOOK_UTILS_HPP
#define HEAPHOOK_UTILS_HPP

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>

// Writes ptr as 0x followed by 2 * sizeof(void *) hex digits; returns the end of the text.
[[maybe_unused]] inline char *format_built_in_type(char *buf, void *ptr) noexcept {
    uintptr_t value = reinterpret_cast<uintptr_t>(ptr);
    *buf++ = '0';
    *buf++ = 'x';
    for (int shift = int(sizeof(void *) * 8) - 4; shift >= 0; shift -= 4) {
        *buf++ = "0123456789abcdef"[(value >> shift) & 0xf];
    }
    return buf;
}

// Writes n in decimal; returns the end of the text.
[[maybe_unused]] inline char *format_built_in_type(char *buf, size_t n) noexcept {
    char digits[24];
    int count = 0;
    do {
        digits[count++] = char('0' + n % 10);
        n /= 10;
    } while (n != 0);
    while (count > 0) *buf++ = digits[--count];
    return buf;
}

// Copies s (without its terminating NUL); returns the end of the text.
[[maybe_unused]] inline char *format_built_in_type(char *buf, const char *s) noexcept {
    size_t length = strlen(s);
    memcpy(buf, s, length);
    return buf + length;
}

// Terminates the text.
[[maybe_unused]] inline void format(char *buf) noexcept {
    *buf = '\0';
}

// Writes every argument, one after the other, and a terminating NUL.
template <typename Head, typename... Tail>
[[maybe_unused]] void format(char *buf, Head head, Tail... tail) noexcept {
    format(format_built_in_type(buf, head), tail...);
}

// One line of comma-separated values: "a, b, c\n" and a NUL.
template <typename Head>
[[maybe_unused]] void format_as_csv_entry(char *buf, Head head) noexcept {
    buf = format_built_in_type(buf, head);
    *buf++ = '\n';
    *buf = '\0';
}

template <typename Head, typename... Tail>
[[maybe_unused]] void format_as_csv_entry(char *buf, Head head, Tail... tail) noexcept {
    buf = format_built_in_type(buf, head);
    buf = format_built_in_type(buf, ", ");
    format_as_csv_entry(buf, tail...);
}

// Formats the arguments into a buffer on the stack and writes it to fd 2 in one write(2).
template <typename... Args, size_t BufSize = 0x400>
[[maybe_unused]] void write_to_stderr(Args... args) {
    char buf[BufSize];
    format(buf, args...);
    ssize_t written = write(STDERR_FILENO, buf, strlen(buf));
    (void)written;
}

[[maybe_unused]] inline bool is_power_of_2(size_t x) noexcept {
    return x != 0 && (x & (x - 1)) == 0;
}

// What the core passes as align besides 1: a power of two and a multiple of sizeof(void *).
[[maybe_unused]] inline bool is_valid_alignment(size_t alignment) noexcept {
    return is_power_of_2(alignment) && alignment % sizeof(void *) == 0;
}

// The smallest power of two >= x (1 for 0); 0 when there is none (x > 2^63).
[[maybe_unused]] inline size_t next_power_of_2(size_t x) noexcept {
    if (x <= 1) return 1;
    if (x > (size_t(1) << (sizeof(size_t) * 8 - 1))) return 0;
    return size_t(1) << (sizeof(size_t) * 8 - __builtin_clzl(x - 1));
}

#endif  // HEAPHOOK_UTILS_HPP

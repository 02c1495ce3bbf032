/*
 * report.c — what the library writes at exit (or at the first violation under --abort),
 * without stdio and without allocating: a static buffer, heaphook_formatf, raw write(2).
 *
 * Two forms:
 *   HEAPHOOK_RT_REPORT=<path>  (`heaphook rtcheck` sets it; %p in it becomes the pid) the
 *       machine form the command reads, symbolises and prints — the program's stdout and
 *       stderr are left alone. Tab-separated lines:
 *         heaphook-rtcheck 1 <pid> <report|abort>
 *         module <load bias> <start> <end> <build id or -> <path>        (hex addresses)
 *         thread <tid> <policy> <priority> <minflt> <majflt> <name, hex>
 *         violation <call> <count> <tid> <policy> <priority> <name, hex> <pc,pc,...>
 *         dropped <n>
 *         end
 *   otherwise (HEAPHOOK_RT_GUARD in a launch file) a readable report on stderr (the fd taken
 *       at start-up: coreutils close fd 2 before destructors run), frames named by dladdr.
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include "heaphook/config.h"
#include "heaphook/log.h"
#include "next.h"
#include "sys.h"

#define HH_REPORT_BUFFER (32 * 1024)
#define HH_REPORT_MAX_THREADS 256

static int hh_report_fd = -1;
static bool hh_report_machine;
static char hh_report_path[512];
static char hh_buf[HH_REPORT_BUFFER];
static size_t hh_used;
static _Atomic int hh_report_lock;

static void hh_flush(void) {
    if (hh_report_fd >= 0) hh_rt_write_all(hh_report_fd, hh_buf, hh_used);
    hh_used = 0;
}

__attribute__((format(printf, 1, 2))) static void hh_out(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    size_t n = heaphook_format(line, sizeof line, fmt, ap);
    va_end(ap);
    if (hh_used + n > sizeof hh_buf) hh_flush();
    memcpy(hh_buf + hh_used, line, n);
    hh_used += n;
}

static void hh_out_hex_text(const char *s) {
    char hex[40];
    size_t n = 0;
    for (; *s != '\0' && n + 2 < sizeof hex; s++) {
        static const char digits[] = "0123456789abcdef";
        hex[n++] = digits[(unsigned char)*s >> 4];
        hex[n++] = digits[(unsigned char)*s & 15];
    }
    hex[n] = '\0';
    hh_out("%s", n > 0 ? hex : "-");
}

/* The path with %p replaced by the pid. */
static void hh_expand(const char *pattern, char *out, size_t cap) {
    size_t n = 0;
    for (const char *p = pattern; *p != '\0' && n + 24 < cap; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            n += heaphook_formatf(out + n, cap - n, "%d", (int)getpid());
            p++;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static void hh_open_machine(void) {
    char path[sizeof hh_report_path + 32];
    hh_expand(hh_report_path, path, sizeof path);
    long fd =
        HEAPHOOK_OS_UNOBSERVED(SYS_openat, AT_FDCWD, (long)path,
                               O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644, 0, 0);
    hh_report_fd = fd >= 0 ? (int)fd : -1;
}

void hh_rt_report_open(void) {
    const char *path = heaphook_env_get_unless_secure("HEAPHOOK_RT_REPORT", NULL);
    if (path != NULL && strlen(path) < sizeof hh_report_path) {
        memcpy(hh_report_path, path, strlen(path) + 1);
        hh_report_machine = true;
        hh_open_machine();
        if (hh_report_fd < 0) {
            heaphook_config_fail("HEAPHOOK_RT_REPORT", path, "a file that can be created",
                                 "/tmp/rtcheck.%p.txt");
        }
        return;
    }
    hh_report_fd = heaphook_report_fd();
}

/* Fork (fork.c): a report another thread was writing is not the child's: the lock and the
 * buffer start empty. */
void hh_rt_report_postfork_child(void) {
    hh_rt_unlock(&hh_report_lock);
    hh_used = 0;
    if (!hh_report_machine) return;
    /* the parent keeps its file; a child writes one of its own only when %p tells them apart */
    if (strstr(hh_report_path, "%p") == NULL) {
        hh_report_fd = -1;
        return;
    }
    hh_open_machine();
}

/* ---- The machine form --------------------------------------------------------------------- */

static void hh_out_build_id(const struct dl_phdr_info *info) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *note = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *note;
            const unsigned char *desc = name + ((note->n_namesz + 3) & ~3u);
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                memcmp(name, "GNU", 4) == 0 && desc + note->n_descsz <= end) {
                for (unsigned k = 0; k < note->n_descsz; k++) hh_out("%02x", desc[k]);
                return;
            }
            p = desc + ((note->n_descsz + 3) & ~3u);
        }
    }
    hh_out("-");
}

static int hh_module_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    (void)arg;
    uintptr_t lo = 0, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (lo == 0 || start < lo) lo = start;
        if (end > hi) hi = end;
    }
    if (hi == 0) return 0;
    char exe[512];
    const char *path = info->dlpi_name;
    if (path == NULL || path[0] == '\0') { /* the program itself */
        long n = HEAPHOOK_OS_UNOBSERVED(SYS_readlinkat, AT_FDCWD, (long)"/proc/self/exe", (long)exe,
                                        sizeof exe - 1, 0, 0);
        if (n <= 0) return 0;
        exe[n] = '\0';
        path = exe;
    }
    if (path[0] != '/') return 0; /* the vDSO: nothing to symbolise it with */
    hh_out("module\t%lx\t%lx\t%lx\t", (unsigned long)info->dlpi_addr, (unsigned long)lo,
           (unsigned long)hi);
    hh_out_build_id(info);
    hh_out("\t%s\n", path);
    return 0;
}

static void hh_out_site_machine(const hh_rt_site *s) {
    hh_out("violation\t%s\t%llu\t%d\t%d\t%d\t", hh_rt_call_name(s->call),
           (unsigned long long)atomic_load(&s->count), (int)s->tid, s->policy, s->priority);
    hh_out_hex_text(s->thread_name);
    hh_out("\t");
    for (int f = 0; f < s->frame_count; f++) hh_out(f == 0 ? "%lx" : ",%lx", s->frames[f]);
    hh_out("\n");
}

/* ---- The readable form -------------------------------------------------------------------- */

static const char *hh_policy_name(int policy) {
    switch (policy) {
        case SCHED_OTHER:
            return "SCHED_OTHER";
        case SCHED_FIFO:
            return "SCHED_FIFO";
        case SCHED_RR:
            return "SCHED_RR";
        case SCHED_BATCH:
            return "SCHED_BATCH";
        case SCHED_IDLE:
            return "SCHED_IDLE";
        case 6:
            return "SCHED_DEADLINE";
        default:
            return "SCHED_?";
    }
}

static void hh_out_site_text(const hh_rt_site *s) {
    hh_out("heaphook rtcheck: %s called %llu time%s in real-time thread %d \"%s\" (%s %d)\n",
           hh_rt_call_name(s->call), (unsigned long long)atomic_load(&s->count),
           atomic_load(&s->count) == 1 ? "" : "s", (int)s->tid, s->thread_name,
           hh_policy_name(s->policy), s->priority);
    for (int f = 0; f < s->frame_count; f++) {
        Dl_info info;
        uintptr_t pc = s->frames[f];
        if (dladdr((void *)(pc - 1), &info) != 0 && info.dli_fname != NULL) {
            const char *fn = info.dli_sname != NULL ? info.dli_sname : "??";
            uintptr_t from =
                info.dli_sname != NULL ? (uintptr_t)info.dli_saddr : (uintptr_t)info.dli_fbase;
            hh_out("    #%d 0x%lx %s+0x%lx (%s)\n", f, pc, fn, pc - from, info.dli_fname);
        } else {
            hh_out("    #%d 0x%lx\n", f, pc);
        }
    }
}

void hh_rt_report_write(const hh_rt_site *only) {
    hh_rt_lock(&hh_report_lock);
    hh_used = 0;
    hh_rt_site *sites = hh_rt_sites();
    static hh_rt_thread_summary threads[HH_REPORT_MAX_THREADS];
    int thread_count = hh_rt_thread_summaries(threads, HH_REPORT_MAX_THREADS);
    if (hh_rt_opts.has_thread_filter) { /* only the threads HEAPHOOK_RT_THREADS names */
        int kept = 0;
        for (int t = 0; t < thread_count; t++)
            if (hh_rt_thread_checked(threads[t].name)) threads[kept++] = threads[t];
        thread_count = kept;
    }
    if (hh_report_machine) {
        hh_out("heaphook-rtcheck\t1\t%d\t%s\n", (int)getpid(), only != NULL ? "abort" : "report");
        dl_iterate_phdr(hh_module_cb, NULL);
        for (int t = 0; t < thread_count; t++) {
            const hh_rt_thread_summary *th = &threads[t];
            hh_out("thread\t%d\t%d\t%d\t%llu\t%llu\t", (int)th->tid, th->policy, th->priority,
                   (unsigned long long)th->minflt, (unsigned long long)th->majflt);
            hh_out_hex_text(th->name);
            hh_out("\n");
        }
    }
    uint64_t total = 0;
    int distinct = 0;
    for (int i = 0; i < HH_RT_MAX_SITES; i++) {
        const hh_rt_site *s = &sites[i];
        if (atomic_load(&s->ready) == 0 || s->excluded || (only != NULL && s != only)) continue;
        if (!hh_report_machine && only == NULL &&
            hh_rt_suppressed(s->call, s->frames, s->frame_count))
            continue;
        total += atomic_load(&s->count);
        distinct++;
        if (hh_report_machine)
            hh_out_site_machine(s);
        else
            hh_out_site_text(s);
    }
    if (hh_report_machine) {
        hh_out("dropped\t%llu\nend\n", (unsigned long long)hh_rt_sites_dropped());
    } else {
        for (int t = 0; t < thread_count; t++) {
            hh_out(
                "heaphook rtcheck: page faults in the real-time context: thread %d \"%s\" "
                "(%s %d): %llu minor, %llu major\n",
                (int)threads[t].tid, threads[t].name, hh_policy_name(threads[t].policy),
                threads[t].priority, (unsigned long long)threads[t].minflt,
                (unsigned long long)threads[t].majflt);
        }
        if (distinct > 0 || thread_count > 0) {
            hh_out("heaphook rtcheck: %llu violation%s at %d call site%s%s\n",
                   (unsigned long long)total, total == 1 ? "" : "s", distinct,
                   distinct == 1 ? "" : "s",
                   only != NULL ? "; stopping (HEAPHOOK_RT_GUARD=abort)" : "");
        }
    }
    hh_flush();
    hh_rt_unlock(&hh_report_lock);
}

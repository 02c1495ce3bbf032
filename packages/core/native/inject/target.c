/* What /proc says about the target before heaphook-inject touches it: each refusal that can be
 * decided without ptrace is decided here, so the target is left untouched. */
#include "inject.h"
#include "arch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CAP_SYS_PTRACE_BIT 19

/* The value of "Key:" in /proc/PID/status (the rest of the line), or false. */
static bool status_field(pid_t pid, const char *key, char *value, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *file = fopen(path, "r");
    if (file == NULL) return false;
    char line[512];
    size_t key_length = strlen(key);
    bool found = false;
    while (fgets(line, sizeof line, file) != NULL) {
        if (strncmp(line, key, key_length) == 0 && line[key_length] == ':') {
            const char *start = line + key_length + 1;
            while (*start == ' ' || *start == '\t') start++;
            snprintf(value, size, "%s", start);
            value[strcspn(value, "\n")] = '\0';
            found = true;
            break;
        }
    }
    fclose(file);
    return found;
}

int yama_scope(void) {
    const char *path = getenv("HEAPHOOK_INJECT_YAMA_FILE");
    if (path == NULL || path[0] == '\0') path = "/proc/sys/kernel/yama/ptrace_scope";
    FILE *file = fopen(path, "r");
    if (file == NULL) return -1;
    int scope = -1;
    if (fscanf(file, "%d", &scope) != 1) scope = -1;
    fclose(file);
    return scope;
}

bool yama_forbids(int scope, bool tracer_is_ancestor, bool has_cap) {
    switch (scope) {
        case 1:
            return !tracer_is_ancestor && !has_cap;
        case 2:
            return !has_cap;
        case 3:
            return true;
        default:
            return false;
    }
}

bool has_cap_sys_ptrace(void) {
    char value[64];
    if (!status_field(getpid(), "CapEff", value, sizeof value)) return false;
    unsigned long long caps = strtoull(value, NULL, 16);
    return (caps >> CAP_SYS_PTRACE_BIT) & 1;
}

bool is_ancestor_of(pid_t pid) {
    pid_t self = getpid();
    char value[64];
    for (int depth = 0; depth < 4096 && pid > 1; depth++) {
        if (!status_field(pid, "PPid", value, sizeof value)) return false;
        pid = (pid_t)atoi(value);
        if (pid == self) return true;
    }
    return false;
}

static const char *user_name(unsigned uid, char *buffer, size_t size) {
    struct passwd *entry = getpwuid(uid);
    if (entry != NULL)
        snprintf(buffer, size, "%s", entry->pw_name);
    else
        snprintf(buffer, size, "uid %u", uid);
    return buffer;
}

const char *elf_machine_name(uint16_t machine) {
    switch (machine) {
        case EM_386:
            return "i386";
        case EM_X86_64:
            return "x86_64";
        case EM_AARCH64:
            return "aarch64";
        case EM_ARM:
            return "arm";
        case EM_RISCV:
            return "riscv";
        case EM_PPC64:
            return "ppc64";
        case EM_S390:
            return "s390";
        default:
            return "another architecture";
    }
}

/* Reads the executable's ELF header and program headers: its machine and whether it has a
 * program interpreter (PT_INTERP: dynamically linked). */
static int read_executable(pid_t pid, uint16_t *machine, unsigned char *elf_class,
                           bool *has_interpreter) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/exe", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    Elf64_Ehdr header;
    ssize_t got = pread(fd, &header, sizeof header, 0);
    if (got < (ssize_t)sizeof(Elf32_Ehdr) || memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) {
        close(fd);
        errno = ENOEXEC;
        return -1;
    }
    *elf_class = header.e_ident[EI_CLASS];
    *machine = header.e_machine;
    *has_interpreter = false;
    if (*elf_class == ELFCLASS64) {
        for (unsigned i = 0; i < header.e_phnum; i++) {
            Elf64_Phdr program;
            off_t at = (off_t)(header.e_phoff + (Elf64_Off)i * header.e_phentsize);
            if (pread(fd, &program, sizeof program, at) != (ssize_t)sizeof program) break;
            if (program.p_type == PT_INTERP) *has_interpreter = true;
        }
    } else {
        Elf32_Ehdr *header32 = (Elf32_Ehdr *)&header;
        for (unsigned i = 0; i < header32->e_phnum; i++) {
            Elf32_Phdr program;
            off_t at = (off_t)(header32->e_phoff + (Elf32_Off)i * header32->e_phentsize);
            if (pread(fd, &program, sizeof program, at) != (ssize_t)sizeof program) break;
            if (program.p_type == PT_INTERP) *has_interpreter = true;
        }
    }
    close(fd);
    return 0;
}

int check_target(pid_t pid, pid_t *tgid) {
    char value[256];
    if (pid <= 0 || !status_field(pid, "Tgid", value, sizeof value))
        return refuse(INJECT_NO_SUCH_PROCESS, "no process with pid %d", (int)pid);
    *tgid = (pid_t)atoi(value);
    pid = *tgid;

    if (status_field(pid, "TracerPid", value, sizeof value) && atoi(value) != 0) {
        int tracer = atoi(value);
        char comm[64] = "?";
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/comm", tracer);
        FILE *file = fopen(path, "r");
        if (file != NULL) {
            if (fgets(comm, sizeof comm, file) != NULL) comm[strcspn(comm, "\n")] = '\0';
            fclose(file);
        }
        return refuse(INJECT_ALREADY_TRACED,
                      "process %d is already traced by process %d (%s): a process has one "
                      "tracer; detach it (quit gdb, stop strace) and try again",
                      (int)pid, tracer, comm);
    }

    bool capable = has_cap_sys_ptrace();
    int scope = yama_scope();
    if (scope >= 2 && yama_forbids(scope, is_ancestor_of(pid), capable)) {
        if (scope == 3)
            return refuse(INJECT_YAMA,
                          "kernel.yama.ptrace_scope = 3 forbids every ptrace attach (it can only "
                          "be lowered by a reboot): heaphook cannot attach to process %d",
                          (int)pid);
        return refuse(INJECT_YAMA,
                      "kernel.yama.ptrace_scope = 2 allows only CAP_SYS_PTRACE to attach: run as "
                      "root (sudo), or lower it: sudo sysctl kernel.yama.ptrace_scope=1");
    }

    unsigned uid[4] = {0}, gid[4] = {0};
    if (status_field(pid, "Uid", value, sizeof value))
        sscanf(value, "%u %u %u %u", &uid[0], &uid[1], &uid[2], &uid[3]);
    if (status_field(pid, "Gid", value, sizeof value))
        sscanf(value, "%u %u %u %u", &gid[0], &gid[1], &gid[2], &gid[3]);
    unsigned my_uid = getuid(), my_gid = getgid();
    bool same_user = uid[0] == my_uid && uid[1] == my_uid && uid[2] == my_uid && gid[0] == my_gid &&
                     gid[1] == my_gid && gid[2] == my_gid;
    if (!same_user && !capable) {
        char name[64];
        return refuse(INJECT_PERMISSION,
                      "process %d belongs to %s and we run as %s without CAP_SYS_PTRACE: run "
                      "heaphook as that user, or as root (sudo)",
                      (int)pid, user_name(uid[1], name, sizeof name),
                      user_name(my_uid, (char[64]){0}, 64));
    }

    uint16_t machine = 0;
    unsigned char elf_class = 0;
    bool has_interpreter = false;
    if (read_executable(pid, &machine, &elf_class, &has_interpreter) != 0) {
        if (errno == EACCES || errno == EPERM)
            return refuse(INJECT_PERMISSION,
                          "process %d's executable cannot be read (not dumpable: setuid or "
                          "prctl(PR_SET_DUMPABLE, 0)?): run heaphook as root",
                          (int)pid);
        if (errno == ENOENT || errno == ESRCH) {
            if (!status_field(pid, "Tgid", value, sizeof value))
                return refuse(INJECT_EXITED, "process %d exited during the attach", (int)pid);
            return refuse(INJECT_STATIC, "process %d has no executable (a kernel thread?)",
                          (int)pid);
        }
        return refuse(INJECT_FAILED, "process %d: cannot read its executable: %s", (int)pid,
                      strerror(errno));
    }
    if (!arch_supported)
        return refuse(INJECT_ARCHITECTURE,
                      "this build of heaphook-inject cannot inject on this architecture (only "
                      "x86_64 is implemented)");
    if (machine != arch_elf_machine || elf_class != ELFCLASS64)
        return refuse(INJECT_ARCHITECTURE,
                      "process %d runs %s code (%d-bit ELF, e_machine %u): heaphook-inject calls "
                      "%s code only; use the heaphook build of that architecture",
                      (int)pid, elf_machine_name(machine), elf_class == ELFCLASS64 ? 64 : 32,
                      (unsigned)machine, elf_machine_name(arch_elf_machine));
    if (!has_interpreter)
        return refuse(INJECT_STATIC,
                      "process %d is statically linked (no program interpreter, no dynamic "
                      "loader): no library can be loaded into it; only a dynamically linked "
                      "build can be traced",
                      (int)pid);
    return INJECT_OK;
}

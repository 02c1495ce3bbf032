/* Addresses of the loader's functions in the target: the objects /proc/PID/maps shows, each
 * one's load bias, and the symbols its ELF .dynsym defines (read from the file, through
 * /proc/PID/root so that a target in another mount namespace is read right). glibc >= 2.34
 * has dlopen, dlsym and dlerror in libc.so.6; older ones in libdl.so.2 when the program loaded
 * it, else libc's private __libc_dlopen_mode / __libc_dlsym (no dlerror then). */
#include "inject.h"
#include "arch.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ARENA_HEAP_SIZE (64UL << 20) /* glibc's HEAP_MAX_SIZE on 64-bit */

enum wanted {
    W_DLOPEN,
    W_DLSYM,
    W_DLERROR,
    W_ERRNO,
    W_MALLOC,
    W_LIBC_DLOPEN,
    W_LIBC_DLSYM,
    W_COUNT
};
static const char *const WANTED_NAMES[W_COUNT] = {
    "dlopen",      "dlsym", "dlerror", "__errno_location", "malloc", "__libc_dlopen_mode",
    "__libc_dlsym"};

struct found {
    uintptr_t value[W_COUNT];
    bool is_default[W_COUNT];
};

static int open_in_target(pid_t pid, const char *path) {
    char rooted[4200];
    snprintf(rooted, sizeof rooted, "/proc/%d/root%s", (int)pid, path);
    int fd = open(rooted, O_RDONLY | O_CLOEXEC);
    if (fd < 0) fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd;
}

static void *read_at(int fd, off_t offset, size_t size) {
    if (size == 0 || size > (256UL << 20)) return NULL;
    void *buffer = malloc(size);
    if (buffer != NULL && pread(fd, buffer, size, offset) != (ssize_t)size) {
        free(buffer);
        return NULL;
    }
    return buffer;
}

/* Reads the ELF header of an object: its machine, the p_vaddr of its first PT_LOAD, whether it
 * is ET_DYN, and the defined dynamic symbols among WANTED_NAMES. false when not a 64-bit ELF
 * (a 32-bit one still gives its machine). */
static bool read_object(int fd, uint16_t *machine, uintptr_t *first_vaddr, uintptr_t *text_end,
                        bool *is_dyn, struct found *found) {
    Elf64_Ehdr header;
    memset(found, 0, sizeof *found);
    if (pread(fd, &header, sizeof header, 0) < (ssize_t)sizeof(Elf32_Ehdr) ||
        memcmp(header.e_ident, ELFMAG, SELFMAG) != 0)
        return false;
    *machine = header.e_machine;
    if (header.e_ident[EI_CLASS] != ELFCLASS64) return false;
    *is_dyn = header.e_type == ET_DYN;
    *first_vaddr = 0;
    *text_end = 0;
    bool first = true;
    for (unsigned i = 0; i < header.e_phnum; i++) {
        Elf64_Phdr program;
        if (pread(fd, &program, sizeof program,
                  (off_t)(header.e_phoff + (Elf64_Off)i * header.e_phentsize)) !=
            (ssize_t)sizeof program)
            break;
        if (program.p_type != PT_LOAD) continue;
        if (first)
            *first_vaddr =
                program.p_vaddr & ~(uintptr_t)(program.p_align > 1 ? program.p_align - 1 : 0);
        first = false;
        if ((program.p_flags & PF_X) && program.p_vaddr + program.p_memsz > *text_end)
            *text_end = program.p_vaddr + program.p_memsz;
    }
    if (header.e_shoff == 0 || header.e_shentsize != sizeof(Elf64_Shdr)) return true;
    Elf64_Shdr *sections =
        read_at(fd, (off_t)header.e_shoff, (size_t)header.e_shnum * sizeof(Elf64_Shdr));
    if (sections == NULL) return true;
    Elf64_Shdr *dynsym = NULL, *versym = NULL;
    for (unsigned i = 0; i < header.e_shnum; i++) {
        if (sections[i].sh_type == SHT_DYNSYM) dynsym = &sections[i];
        if (sections[i].sh_type == SHT_GNU_versym) versym = &sections[i];
    }
    if (dynsym != NULL && dynsym->sh_link < header.e_shnum &&
        dynsym->sh_entsize == sizeof(Elf64_Sym)) {
        Elf64_Shdr *strtab = &sections[dynsym->sh_link];
        size_t count = dynsym->sh_size / sizeof(Elf64_Sym);
        Elf64_Sym *symbols = read_at(fd, (off_t)dynsym->sh_offset, dynsym->sh_size);
        char *strings = read_at(fd, (off_t)strtab->sh_offset, strtab->sh_size);
        uint16_t *versions = versym != NULL && versym->sh_size == count * sizeof(uint16_t)
                                 ? read_at(fd, (off_t)versym->sh_offset, versym->sh_size)
                                 : NULL;
        for (size_t s = 0; symbols != NULL && strings != NULL && s < count; s++) {
            const Elf64_Sym *symbol = &symbols[s];
            if (symbol->st_shndx == SHN_UNDEF || symbol->st_name >= strtab->sh_size) continue;
            int type = ELF64_ST_TYPE(symbol->st_info);
            if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
            const char *name = strings + symbol->st_name;
            bool is_default = versions == NULL || (versions[s] & 0x8000) == 0;
            for (int w = 0; w < W_COUNT; w++) {
                if (strcmp(name, WANTED_NAMES[w]) != 0) continue;
                if (found->value[w] != 0 && found->is_default[w] && !is_default) continue;
                found->value[w] = symbol->st_value;
                found->is_default[w] = is_default;
            }
        }
        free(symbols);
        free(strings);
        free(versions);
    }
    free(sections);
    return true;
}

/*
 * The ring buffer of heaphook's tracer (a memfd it shares with its collector, heaptrack's
 * native/track/ring.c). A thread waiting on a futex in it is inside the tracer's malloc, waiting
 * for the collector to make room, and may hold the tracer's stack-table lock: it counts as
 * allocator data, so such a thread is never the one taken (`heaphook record -p` calls the tracer
 * again to detach).
 */
#define TRACER_RING_MAPPING "/memfd:heaphook-ring"

static bool is_named(const char *path, const char *prefix) {
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    return strncmp(base, prefix, strlen(prefix)) == 0;
}

const struct target_object *object_at(const struct target_map *map, uintptr_t addr) {
    for (size_t i = 0; i < map->count; i++)
        if (addr >= map->objects[i].start && addr < map->objects[i].end) return &map->objects[i];
    return NULL;
}

bool is_allocator_data(pid_t pid, const struct target_map *map, uintptr_t addr) {
    (void)pid;
    const struct target_object *object = object_at(map, addr);
    if (object != NULL) return object->exports_malloc;
    return (addr & (ARENA_HEAP_SIZE - 1)) < 4096;
}

/*
 * The code cave of an object: the bytes of its last executable page after the end of its
 * executable segment (p_vaddr + p_memsz). They are mapped executable but belong to no section:
 * nothing runs or reads them through this mapping (another mapping of the same file page, the
 * next segment, is not affected by a write here, which copies the page). heaphook-inject puts
 * its return trampoline there (session.c).
 */
static void find_cave(struct target_object *object, uintptr_t text_end) {
    object->cave = object->cave_size = 0;
    if (text_end == 0 || object->text_map_end == 0) return;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = (object->base + text_end + 15) & ~(uintptr_t)15;
    uintptr_t end = (object->base + text_end + page - 1) & ~(page - 1);
    if (end > object->text_map_end) end = object->text_map_end;
    if (start < object->text_map_start || start >= end) return;
    object->cave = start;
    object->cave_size = end - start;
}

void free_target_map(struct target_map *map) {
    free(map->objects);
    memset(map, 0, sizeof *map);
}

int read_target_map(pid_t pid, struct target_map *map) {
    memset(map, 0, sizeof *map);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *maps = fopen(path, "r");
    if (maps == NULL) return refuse(INJECT_EXITED, "process %d exited during the attach", (int)pid);
    size_t capacity = 0;
    char line[4400];
    struct target_object *last = NULL;
    while (fgets(line, sizeof line, maps) != NULL) {
        unsigned long start, end, offset;
        char perms[8];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %n", &start, &end, perms, &offset, &name_at) < 4)
            continue;
        char *name = line + name_at;
        name[strcspn(name, "\n")] = '\0';
        if (name[0] != '/') {
            /* An anonymous mapping right after an object's last one is its .bss tail. */
            if (name[0] == '\0' && last != NULL && last->end == start && perms[1] == 'w')
                last->end = end;
            last = NULL;
            continue;
        }
        struct target_object *object = NULL;
        for (size_t i = 0; i < map->count; i++)
            if (strcmp(map->objects[i].path, name) == 0) object = &map->objects[i];
        if (object == NULL) {
            if (map->count == capacity) {
                capacity = capacity ? capacity * 2 : 32;
                map->objects = realloc(map->objects, capacity * sizeof *map->objects);
                if (map->objects == NULL) return refuse(INJECT_FAILED, "out of memory");
            }
            object = &map->objects[map->count++];
            memset(object, 0, sizeof *object);
            snprintf(object->path, sizeof object->path, "%s", name);
            object->start = start;
            object->base = offset == 0 ? start : 0;
        }
        if (start < object->start) object->start = start;
        if (end > object->end) object->end = end;
        if (perms[0] == 'r' && perms[2] == 'x' && end > object->text_map_end) {
            object->text_map_start = start;
            object->text_map_end = end;
        }
        if (offset == 0 && object->base == 0) object->base = start;
        last = object;
    }
    fclose(maps);

    struct found chosen[W_COUNT];
    int chosen_rank[W_COUNT];
    memset(chosen, 0, sizeof chosen);
    for (int w = 0; w < W_COUNT; w++) chosen_rank[w] = -1;
    uintptr_t address[W_COUNT] = {0};
    for (size_t i = 0; i < map->count; i++) {
        struct target_object *object = &map->objects[i];
        if (strncmp(object->path, TRACER_RING_MAPPING, strlen(TRACER_RING_MAPPING)) == 0) {
            object->exports_malloc = true;
            continue;
        }
        int fd = open_in_target(pid, object->path);
        if (fd < 0) continue;
        uint16_t machine = 0;
        uintptr_t first_vaddr = 0, text_end = 0;
        bool is_dyn = false;
        struct found found;
        bool is_elf64 = read_object(fd, &machine, &first_vaddr, &text_end, &is_dyn, &found);
        close(fd);
        object->machine = machine;
        if (machine != 0 && machine != arch_elf_machine) {
            int code = refuse(INJECT_ARCHITECTURE,
                              "process %d runs %s code (%s, under an emulator such as qemu-user?): "
                              "heaphook-inject calls %s code only",
                              (int)pid, elf_machine_name(machine), object->path,
                              elf_machine_name(arch_elf_machine));
            free_target_map(map);
            return code;
        }
        if (!is_elf64) continue;
        if (is_dyn)
            object->base -= first_vaddr;
        else
            object->base = 0;
        object->exports_malloc = found.value[W_MALLOC] != 0;
        object->is_loader = is_named(object->path, "ld-linux") || is_named(object->path, "ld-");
        /* Prefer libc, then libdl, then any other object defining the name. */
        int rank = is_named(object->path, "libc.so") || is_named(object->path, "libc-") ? 2
                   : is_named(object->path, "libdl")                                    ? 1
                                                                                        : 0;
        object->cave_rank = rank == 2 ? 2 : object->is_loader ? 1 : 0;
        find_cave(object, text_end);
        for (int w = 0; w < W_COUNT; w++) {
            if (found.value[w] == 0 || rank <= chosen_rank[w]) continue;
            chosen_rank[w] = rank;
            address[w] = object->base + found.value[w];
        }
    }
    map->dlopen = address[W_DLOPEN];
    map->dlsym = address[W_DLSYM];
    map->dlerror = address[W_DLERROR];
    map->errno_location = address[W_ERRNO];
    if (map->dlopen == 0 || map->dlsym == 0) {
        /* glibc < 2.34 without libdl loaded: libc's own entry points, same arguments. */
        map->dlopen = address[W_LIBC_DLOPEN];
        map->dlsym = address[W_LIBC_DLSYM];
        map->dlerror = 0;
    }
    if (map->dlopen == 0 || map->dlsym == 0) {
        int code = refuse(INJECT_NO_LOADER,
                          "process %d has no dlopen in its libraries (not a glibc program?): "
                          "heaphook-inject needs glibc's loader",
                          (int)pid);
        free_target_map(map);
        return code;
    }
    return INJECT_OK;
}

/*
 * leaks.c — the leak checker's test program (test/integration/leaks.test.ts). Every scenario prints
 * its expected verdicts before the checks run:
 *
 *   expect <pid> <mode> <leaked|reachable> <address> <name>
 *
 * mode "auto" is the conservative check at exit, "precise" the precise API's check
 * (heaphook_leak_check_precise, run once after the set-up); the precise check's own listing
 * (heaphook_leaks_print) follows as "leak <address> <size> <type>" lines.
 *
 *   hh_test_leaks scenarios   the blind spots of the classic design, and typed objects
 *   hh_test_leaks fork        a leak in the parent, another in the child: both logs check
 *   hh_test_leaks signal [N]  threads allocate while the process sends itself SIGUSR2 (or N)
 *   hh_test_leaks churn       300,000 blocks replaced in random order, then 3,000 lost
 *   hh_test_leaks rounds      checks on SIGUSR2 while rounds of threads replace blocks and exit
 *   hh_test_leaks inflight    a check while another thread is inside free (preload
 *                             libheaphook_heaptrack.so, then hh_test_slow_free.so)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heaphook/leaks.h"

#define MASK 0x5a5a5a5a5a5a5a5aull

static void expect(const char *mode, const char *verdict, const void *p, const char *name) {
    printf("expect %d %s %s %#lx %s\n", (int)getpid(), mode, verdict, (unsigned long)p, name);
}

/* ---- the classic design's blind spots, untyped (automatic mode) -------------------------- */

struct holder {
    uintptr_t n; /* a pointer kept in an integer */
};
struct inner {
    int y;
    void *p;
};
struct outer {
    long x;
    struct inner in;
    long z;
};
union u {
    double d;
    void *p;
    long l;
};
struct link {
    struct link *next;
    long pad[3];
};

struct holder *g_int_holder; /* not static: the stores stay */
char *g_interior;
struct inner *g_embedded;
union u *g_union;
void *g_other_calls[3]; /* blocks from realloc, calloc, posix_memalign */

static atomic_uintptr_t g_thread_block; /* masked: not a pointer */
static atomic_int g_thread_ready;
static int g_block_pipe[2];

static void *stack_holder(void *arg) {
    (void)arg;
    void *volatile b = malloc(48);
    memset(b, 0, 48);
    atomic_store(&g_thread_block, (uintptr_t)b ^ MASK);
    atomic_store(&g_thread_ready, 1);
    char c;
    while (read(g_block_pipe[0], &c, 1) < 0) {
    }
    free(b);
    return NULL;
}

__attribute__((noinline)) static void blind_spots(void) {
    g_int_holder = malloc(sizeof *g_int_holder);
    void *b1 = malloc(40);
    g_int_holder->n = (uintptr_t)b1;
    expect("auto", "reachable", g_int_holder, "int-holder");
    expect("auto", "reachable", b1, "int-field");

    char *b2 = malloc(64);
    g_interior = b2 + 24;
    expect("auto", "reachable", b2, "interior");

    struct outer *o = malloc(sizeof *o);
    void *b3 = malloc(24);
    o->in.p = b3;
    g_embedded = &o->in;
    expect("auto", "reachable", o, "embedding-outer");
    expect("auto", "reachable", b3, "embedded-pointee");

    g_union = malloc(sizeof *g_union);
    void *b4 = malloc(32);
    g_union->p = b4;
    expect("auto", "reachable", g_union, "union-holder");
    expect("auto", "reachable", b4, "union");

    struct link *c1 = malloc(sizeof *c1), *c2 = malloc(sizeof *c2);
    c1->next = c2;
    c2->next = c1;
    expect("auto", "leaked", c1, "cycle-a");
    expect("auto", "leaked", c2, "cycle-b");

    struct link *l1 = malloc(sizeof *l1), *l2 = malloc(sizeof *l2);
    l1->next = l2;
    l2->next = NULL;
    expect("auto", "leaked", l1, "lost");
    expect("auto", "leaked", l2, "only-from-leaked");
}

/* Every allocation call keeps the table right: moved reallocs, calloc, aligned calls. */
__attribute__((noinline)) static void other_calls(void) {
    void *r = malloc(16);
    r = realloc(r, 4000); /* moves */
    g_other_calls[0] = r;
    expect("auto", "reachable", r, "realloc-kept");
    void *lost = realloc(malloc(16), 3000);
    expect("auto", "leaked", lost, "realloc-lost");
    g_other_calls[1] = calloc(10, 10);
    expect("auto", "reachable", g_other_calls[1], "calloc-kept");
    void *aligned = NULL;
    if (posix_memalign(&aligned, 256, 100) != 0) abort();
    expect("auto", "leaked", aligned, "aligned-lost");
    g_other_calls[2] = aligned_alloc(64, 128);
    expect("auto", "reachable", g_other_calls[2], "aligned-kept");
    free(realloc(malloc(8), 9000)); /* gone: in no verdict */
}

__attribute__((noinline)) static void other_thread_stack(void) {
    if (pipe(g_block_pipe) != 0) abort();
    pthread_t t;
    pthread_create(&t, NULL, stack_holder, NULL);
    pthread_detach(t);
    while (!atomic_load(&g_thread_ready)) usleep(1000);
    expect("auto", "reachable", (void *)(atomic_load(&g_thread_block) ^ MASK), "thread-stack");
}

/* ---- typed objects (precise API, and the automatic mode's use of their layouts) ---------- */

struct node {
    long key;
    struct node *next;
    char name[16];
};

struct node *g_root_node;    /* registered root */
struct node *g_unregistered; /* a global the precise model does not know */

__attribute__((noinline)) static void typed(void) {
    heaphook_field fields[] = {
        {"key", "long", offsetof(struct node, key), sizeof(long), 0},
        {"next", "struct node *", offsetof(struct node, next), sizeof(void *), 1},
        {"name", "char[16]", offsetof(struct node, name), 16, 0},
    };
    int node = heaphook_type_register("node", sizeof(struct node), fields, 3);
    heaphook_field ptr_field[] = {{"p", "struct node *", 0, sizeof(void *), 1}};
    int node_ptr = heaphook_type_register("node_ptr", sizeof(void *), ptr_field, 1);
    if (node <= 0 || node_ptr <= 0) abort();
    heaphook_root_add(&g_root_node, node_ptr);

    struct node *a = heaphook_alloc_typed(node, 1);
    struct node *b = heaphook_alloc_typed(node, 1);
    struct node *c = heaphook_alloc_typed(node, 1);
    g_root_node = a;
    a->next = c;
    a->key = (long)b; /* not a pointer field: keeps nothing alive */
    expect("precise", "reachable", a, "typed-root");
    expect("auto", "reachable", a, "typed-root");
    expect("precise", "reachable", c, "typed-next");
    expect("auto", "reachable", c, "typed-next");
    expect("precise", "leaked", b, "typed-key");
    expect("auto", "leaked", b, "typed-key");

    struct node *d = heaphook_alloc_typed(node, 1), *e = heaphook_alloc_typed(node, 1);
    d->next = e;
    e->next = d;
    expect("precise", "leaked", d, "typed-cycle-a");
    expect("auto", "leaked", d, "typed-cycle-a");
    expect("precise", "leaked", e, "typed-cycle-b");
    expect("auto", "leaked", e, "typed-cycle-b");

    struct node *f = heaphook_alloc_typed(node, 1);
    g_unregistered = f;
    expect("precise", "leaked", f, "typed-unregistered-global");
    expect("auto", "reachable", f, "typed-unregistered-global");

    struct node *g = heaphook_alloc_typed(node, 1), *h = heaphook_alloc_typed(node, 1);
    heaphook_root_mark(g, 1);
    g->next = h;
    expect("precise", "reachable", g, "typed-dynamic-root");
    expect("auto", "reachable", g, "typed-dynamic-root");
    expect("precise", "reachable", h, "typed-from-dynamic-root");
    expect("auto", "reachable", h, "typed-from-dynamic-root");
}

__attribute__((noinline)) static void precise_check(void) {
    long n = heaphook_leak_check_precise();
    printf("precise-check %ld\n", n);
    fflush(stdout);
    heaphook_leaks_print(1);
}

/* Overwrites the dead stack the set-up used. */
__attribute__((noinline)) static void scrub(void) {
    volatile char junk[32768];
    memset((char *)junk, 0, sizeof junk);
}

static int scenarios(void) {
    blind_spots();
    other_calls();
    other_thread_stack();
    typed();
    fflush(stdout);
    precise_check();
    scrub();
    return 0;
}

/* ---- fork -------------------------------------------------------------------------------- */

void *g_kept[2]; /* the parent's, the child's */

__attribute__((noinline)) static void lose(const char *name, size_t size) {
    void *p = malloc(size);
    memset(p, 1, size);
    expect("auto", "leaked", p, name);
}

__attribute__((noinline)) static void keep(const char *name, size_t size, int slot) {
    g_kept[slot] = malloc(size);
    expect("auto", "reachable", g_kept[slot], name);
}

/* Blocks freed right before the fork: their frees are still in the ring, unread, when the
 * child is made (the drain thread has had time to read their allocations). A child that did
 * not read them finds them leaked. */
#define FORK_BURST 500

static int forking(void) {
    lose("parent-lost", 40);
    keep("parent-kept", 40, 0);
    void *burst[FORK_BURST];
    for (int i = 0; i < FORK_BURST; i++) burst[i] = malloc(32 + (size_t)(i % 64));
    struct timespec ts = {0, 250 * 1000 * 1000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < FORK_BURST; i++) free(burst[i]);
    memset(burst, 0, sizeof burst);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        lose("child-lost", 56);
        keep("child-kept", 56, 1);
        fflush(stdout);
        scrub();
        exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    scrub();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

/* ---- a check on HEAPHOOK_LEAK_SIGNAL while threads allocate ------------------------------ */

static atomic_int g_stop;
static int g_park[2];

static void *churn(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *ring[64] = {0};
    for (unsigned i = 0; !atomic_load(&g_stop); i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = i % 64;
        free(ring[k]);
        ring[k] = malloc(16 + (seed >> 16) % 512);
    }
    /* stay alive with the ring on this stack: the exit check stops and scans this thread
     * (joined threads leave their TLS vector in glibc's stack cache, which no check scans) */
    char c;
    while (read(g_park[0], &c, 1) < 0) {
    }
    for (int k = 0; k < 64; k++) free(ring[k]);
    return NULL;
}

static int signalled(int sig) {
    lose("signal-lost", 72);
    keep("signal-kept", 72, 0);
    fflush(stdout);
    if (pipe(g_park) != 0) abort();
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i + 1));
    for (int n = 0; n < 3; n++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
        kill(getpid(), sig);
    }
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
    atomic_store(&g_stop, 1);
    for (int i = 0; i < 2; i++) pthread_detach(t[i]);
    scrub();
    return 0;
}

/* ---- the live-block table under churn --------------------------------------------------- */

/* Enough blocks, replaced in random order, that every shard of the tracer's table grows
 * several times and its probe runs wrap around and are shortened by deletions again and
 * again; then CHURN_LEAKED of them lose their last pointer and the rest stay in g_churn. The
 * exit check must see exactly the blocks the log says are live, and find exactly those lost. */
#define CHURN_SLOTS 30000
#define CHURN_ROUNDS 10
#define CHURN_LEAKED 3000
void *g_churn[CHURN_SLOTS];

__attribute__((noinline)) static void churn_table(void) {
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (long i = 0; i < (long)CHURN_SLOTS * CHURN_ROUNDS; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        const size_t k = (size_t)(x % CHURN_SLOTS);
        free(g_churn[k]);
        const size_t size = 16 + (size_t)((x >> 40) % 240);
        /* cleared: malloc leaves the allocator's old links in a reused block, stale pointers a
         * conservative scan would follow to lost blocks */
        g_churn[k] = memset(malloc(size), 0, size);
    }
    for (int k = 0; k < CHURN_LEAKED; k++) {
        expect("auto", "leaked", g_churn[k], "churn-lost");
        g_churn[k] = NULL;
    }
    printf("churn-kept %d\n", CHURN_SLOTS - CHURN_LEAKED);
}

static int churned(void) {
    churn_table();
    fflush(stdout);
    scrub();
    return 0;
}

/* ---- checks while threads come and go ----------------------------------------------------- */

/* Rounds of ROUND_THREADS threads, each replacing the blocks of its part of g_rounds (sizes
 * ROUND_MIN..ROUND_MIN+63, which nothing else here uses) and exiting, while the process sends
 * itself SIGUSR2 (a check each time). Every block stays reachable: from g_rounds, or from the
 * registers and stack of the thread between a malloc and its store, or between a load and its
 * free. A thread that exits frees its tcache through glibc's internal calls, under the arena
 * lock, outside the hooks: a check that stopped it there, while another thread waited for that
 * lock inside a hook, must still see a table that is up to date. */
#define ROUND_THREADS 8
#define ROUND_SLOTS 512
#define ROUND_MIN 1000
#define ROUNDS 60
void *g_rounds[ROUND_THREADS][ROUND_SLOTS];

static void *round_thread(void *arg) {
    void **mine = arg;
    unsigned seed = (unsigned)(uintptr_t)arg;
    for (int i = 0; i < 4 * ROUND_SLOTS; i++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % ROUND_SLOTS;
        void *old = mine[k];
        mine[k] = malloc(ROUND_MIN + (seed >> 20) % 64);
        free(old);
    }
    return NULL;
}

static atomic_int g_rounds_done;

static void *round_signaller(void *arg) {
    (void)arg;
    while (!atomic_load(&g_rounds_done)) {
        kill(getpid(), SIGUSR2);
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static int rounds(void) {
    lose("rounds-lost", 72);
    fflush(stdout);
    pthread_t signaller;
    pthread_create(&signaller, NULL, round_signaller, NULL);
    for (int r = 0; r < ROUNDS; r++) {
        pthread_t t[ROUND_THREADS];
        for (int i = 0; i < ROUND_THREADS; i++) /* another thread's blocks each round */
            pthread_create(&t[i], NULL, round_thread, g_rounds[(i + r) % ROUND_THREADS]);
        for (int i = 0; i < ROUND_THREADS; i++) pthread_join(t[i], NULL);
    }
    atomic_store(&g_rounds_done, 1);
    pthread_join(signaller, NULL);
    printf("rounds %d\n", ROUNDS);
    fflush(stdout);
    scrub();
    return 0;
}

/* ---- a check while a call is inside the tracer's hook ------------------------------------ */

/* The table is kept by the drain thread from the ring's records (README, "Leak checking"). A
 * thread inside free has its record reserved and not yet published, and the records after it
 * wait behind it. Here the main thread frees INFLIGHT_FREED blocks while another thread sits
 * in a slow free (hh_test_slow_free.so holds it 300 ms), then checks: unless the check lets
 * the slow call publish its record before stopping the thread, the table lags behind those
 * frees and the check finds the freed blocks leaked. */
#define INFLIGHT_FREED 200

static void *slow_free_thread(void *target) {
    free(target);
    /* stays alive, as churn's threads do: a joined thread's TLS vector would be lost */
    char c;
    while (read(g_park[0], &c, 1) < 0) {
    }
    return NULL;
}

static int inflight(void) {
    void *_Atomic *target = dlsym(RTLD_DEFAULT, "hh_slow_free_target");
    atomic_int *entered = dlsym(RTLD_DEFAULT, "hh_slow_free_entered");
    if (target == NULL || entered == NULL) {
        fprintf(stderr, "inflight: preload hh_test_slow_free.so after the tracer\n");
        return 2;
    }
    lose("inflight-lost", 88);
    keep("inflight-kept", 88, 0);
    void *blocks[INFLIGHT_FREED];
    for (int i = 0; i < INFLIGHT_FREED; i++) blocks[i] = malloc(24 + (size_t)i);
    void *slow = malloc(40);
    atomic_store(target, slow);
    if (pipe(g_park) != 0) abort();
    pthread_t t;
    pthread_create(&t, NULL, slow_free_thread, slow);
    pthread_detach(t);
    while (!atomic_load(entered)) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < INFLIGHT_FREED; i++) free(blocks[i]);
    memset(blocks, 0, sizeof blocks);
    fflush(stdout);
    long leaked = heaphook_leak_check();
    printf("inflight-check %ld\n", leaked);
    fflush(stdout);
    scrub();
    return 0;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "scenarios";
    if (strcmp(what, "scenarios") == 0) return scenarios();
    if (strcmp(what, "fork") == 0) return forking();
    if (strcmp(what, "signal") == 0) return signalled(argc > 2 ? atoi(argv[2]) : SIGUSR2);
    if (strcmp(what, "churn") == 0) return churned();
    if (strcmp(what, "inflight") == 0) return inflight();
    if (strcmp(what, "rounds") == 0) return rounds();
    fprintf(stderr, "usage: hh_test_leaks scenarios|fork|signal|churn\n");
    return 2;
}

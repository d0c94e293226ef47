/* Starter threads (see starter.h).
 *
 * Why: a sandbox's init used to be a copy of runbox (clone3 as fork), and
 * a server's address space is about 170 mappings and 14 threads' stacks:
 * copying it, the page faults of the copy-on-write afterwards (in runbox's
 * threads too, and the flushes of their TLBs) and tearing it down when
 * init executed runbox-init were a sixth of the CPU of a pooled execution.
 * With CLONE_VM there is no copy; with CLONE_VFORK the thread that cloned
 * sleeps until init executes, so init may use that thread's thread-local
 * storage, as posix_spawn's child does. That thread cannot be the one that
 * asked for the sandbox (it has to map init's users and make its network
 * meanwhile), hence threads of their own, one per start in flight, kept
 * for the next.
 *
 * A job's life: the asking thread posts it (state 0) and waits; the child
 * says it runs (1) and the asking thread goes on; the starter thread wakes
 * when the child has executed or ended, and says so (2). */
#include "sandbox/starter.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__)
#define HAVE_CLONE3_CALL 1
/* rdi = args, rsi = fn, rdx = arg. The child starts on args->stack with
 * every register but rax as the parent had it: fn and arg are in r8 and r9,
 * which the system call leaves alone. */
__asm__(".text\n"
        ".globl rbx_clone3_call\n"
        ".type rbx_clone3_call,@function\n"
        "rbx_clone3_call:\n"
        "    mov %rsi, %r8\n"
        "    mov %rdx, %r9\n"
        "    mov $88, %esi\n" /* sizeof (struct clone_args), CLONE_ARGS_SIZE_VER2 */
        "    mov $435, %eax\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    xor %ebp, %ebp\n"
        "    and $-16, %rsp\n"
        "    mov %r9, %rdi\n"
        "    call *%r8\n"
        "    mov %eax, %edi\n"
        "    mov $60, %eax\n" /* exit: this task alone */
        "    syscall\n"
        "    hlt\n"
        "1:  cmp $-4095, %rax\n"
        "    jae 2f\n"
        "    ret\n"
        "2:  neg %eax\n"
        "    mov %eax, %edi\n"
        "    jmp rbx_clone3_failed\n"
        ".size rbx_clone3_call, .-rbx_clone3_call\n");
#elif defined(__aarch64__)
#define HAVE_CLONE3_CALL 1
/* x0 = args, x1 = fn, x2 = arg; fn and arg wait in x10 and x11. */
__asm__(".text\n"
        ".globl rbx_clone3_call\n"
        ".type rbx_clone3_call,%function\n"
        "rbx_clone3_call:\n"
        "    mov x10, x1\n"
        "    mov x11, x2\n"
        "    mov x1, #88\n"
        "    mov x8, #435\n"
        "    svc #0\n"
        "    cbnz x0, 1f\n"
        "    mov x29, #0\n"
        "    mov x30, #0\n"
        "    mov x0, x11\n"
        "    blr x10\n"
        "    mov x8, #93\n"
        "    svc #0\n"
        "1:  cmn x0, #4095\n"
        "    b.cs 2f\n"
        "    ret\n"
        "2:  neg w0, w0\n"
        "    b rbx_clone3_failed\n"
        ".size rbx_clone3_call, .-rbx_clone3_call\n");
#endif

#ifdef HAVE_CLONE3_CALL
/* The parent's side of a failed clone3: errno, as the libc wrappers set it
 * (a tail call from the assembly, which returns its -1). */
_Static_assert(sizeof(struct clone_args) == 88, "the size rbx_clone3_call passes");

__attribute__((visibility("hidden"))) long rbx_clone3_failed(int error);
long rbx_clone3_failed(int error)
{
    errno = error;
    return -1;
}

bool rbx_starter_supported(void)
{
    return true;
}
#else
long rbx_clone3_call(struct clone_args *args, int (*fn)(void *), void *arg)
{
    (void)args, (void)fn, (void)arg;
    errno = ENOSYS;
    return -1;
}

bool rbx_starter_supported(void)
{
    return false;
}
#endif

static void futex_wait(int *word, int value, const struct timespec *timeout)
{
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, timeout, NULL, 0);
}

/* The child calls this too: a private futex is keyed by the memory it is
 * in, which the child shares. */
static void set_and_wake(int *word, int value)
{
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_until(int *word, int at_least)
{
    int now;
    while ((now = __atomic_load_n(word, __ATOMIC_ACQUIRE)) < at_least)
        futex_wait(word, now, NULL);
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* The same, for at most timeout_ms: false if the word is not there yet. */
static bool wait_until_for(int *word, int at_least, int timeout_ms)
{
    int64_t deadline = now_ms() + timeout_ms;
    int now;
    while ((now = __atomic_load_n(word, __ATOMIC_ACQUIRE)) < at_least) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return false;
        struct timespec timeout = {.tv_sec = left / 1000, .tv_nsec = (left % 1000) * 1000000};
        futex_wait(word, now, &timeout);
    }
    return true;
}

/* A sandbox's init builds its root on its stack (paths, mount steps); the
 * program only sets itself up there before it executes. */
#define STACK_SIZE (256 * 1024)

typedef struct starter {
    struct starter *next_idle;
    int go; /* futex word: 1 when job is set */
    rbx_starter_job *job;
    rbx_starter_stacks stacks;
} starter;

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static starter *idle;
static __thread starter *self;

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
/* A child that executes or exits leaves its frames' redzones poisoned in
 * the shadow memory, which a CLONE_VM child shares with runbox: the next
 * child on the same stack would trip over them. */
#define FRESH_STACK(base, size) __asan_unpoison_memory_region(base, size)
#else
#define FRESH_STACK(base, size) ((void)(base), (void)(size))
#endif

rbx_starter_stacks rbx_starter_stacks_here(void)
{
    FRESH_STACK(self->stacks.init, self->stacks.size);
    FRESH_STACK(self->stacks.program, self->stacks.size);
    return self->stacks;
}

/* Two stacks and a guard page below each, in one mapping. */
static int make_stacks(rbx_starter_stacks *stacks);
#define PAGE_GUARD(stacks) ((size_t)((stacks).init - (stacks).program) - (stacks).size)

static void run(starter *s)
{
    rbx_starter_job *job = s->job;
    pid_t pid = job->clone(job, job->arg);
    if (pid < 0)
        job->error = errno;
    /* The child was killed before it said its stacks were free: its own
     * child may still be on one, for the moment the kernel takes to kill
     * it too. New stacks for the next; the old go, and with them anything
     * still on them. Rare (a start that failed), so the cost is no matter. */
    if (pid > 0 && !__atomic_load_n(&job->stacks_left, __ATOMIC_ACQUIRE)) {
        rbx_starter_stacks old = s->stacks;
        if (make_stacks(&s->stacks) == 0)
            munmap(old.program - PAGE_GUARD(old), 2 * (old.size + PAGE_GUARD(old)));
        else
            s->stacks = old;
    }
    /* Free for the next start before the last word to this one's asker,
     * after which the job (on the asker's stack) may be gone. */
    pthread_mutex_lock(&idle_lock);
    s->next_idle = idle;
    idle = s;
    pthread_mutex_unlock(&idle_lock);
    set_and_wake(&job->state, RBX_STARTER_OVER);
}

static void *starter_main(void *arg)
{
    /* No handler of runbox's runs here: a signal for runbox goes to a
     * thread that is not asleep in a clone. (Init unblocks its own.) */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    self = arg;
    for (;;) {
        wait_until(&self->go, 1);
        __atomic_store_n(&self->go, 0, __ATOMIC_RELAXED);
        run(self);
    }
    return NULL;
}

static int make_stacks(rbx_starter_stacks *stacks)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t whole = 2 * (page + STACK_SIZE);
    char *base = mmap(NULL, whole, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED)
        return -1;
    stacks->program = base + page;
    stacks->init = base + 2 * page + STACK_SIZE;
    stacks->size = STACK_SIZE;
    if (mprotect(stacks->program, STACK_SIZE, PROT_READ | PROT_WRITE) != 0 ||
        mprotect(stacks->init, STACK_SIZE, PROT_READ | PROT_WRITE) != 0) {
        munmap(base, whole);
        return -1;
    }
    return 0;
}

/* A starter thread needs little stack of its own: its work is one clone. */
#define THREAD_STACK_SIZE (128 * 1024)

static starter *new_starter(void)
{
    starter *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    pthread_attr_t attr;
    pthread_t thread;
    int rc = pthread_attr_init(&attr);
    if (rc == 0 && make_stacks(&s->stacks) != 0)
        rc = errno;
    if (rc == 0 && (rc = pthread_attr_setstacksize(&attr, THREAD_STACK_SIZE)) == 0 &&
        (rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED)) == 0)
        rc = pthread_create(&thread, &attr, starter_main, s);
    pthread_attr_destroy(&attr);
    if (rc == 0) /* its name in ps and /proc: a thread of runbox's that clones */
        pthread_setname_np(thread, "runbox-starter");
    if (rc != 0) {
        /* The stacks stay mapped: a thread that was not made never used them,
         * and a failure here is rare enough not to mind 512 KB. */
        free(s);
        errno = rc;
        return NULL;
    }
    return s;
}

/* A fork of runbox has none of its threads: its first start makes its
 * own starter (the idle ones, and the lock a thread of the parent may
 * have held, are the parent's). */
static void forget_starters(void)
{
    idle = NULL;
    pthread_mutex_init(&idle_lock, NULL);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void watch_forks(void)
{
    pthread_atfork(NULL, NULL, forget_starters);
}

static starter *take_starter(void)
{
    pthread_once(&atfork_once, watch_forks);
    pthread_mutex_lock(&idle_lock);
    starter *s = idle;
    if (s)
        idle = s->next_idle;
    pthread_mutex_unlock(&idle_lock);
    return s ? s : new_starter();
}

pid_t rbx_starter_begin(rbx_starter_job *job, rbx_starter_clone clone, void *arg)
{
    *job = (rbx_starter_job){.clone = clone, .arg = arg, .state = RBX_STARTER_POSTED, .pid = -1};
    starter *s = take_starter();
    if (!s) {
        job->state = RBX_STARTER_OVER;
        return -1;
    }
    s->job = job;
    set_and_wake(&s->go, 1);
    wait_until(&job->state, RBX_STARTER_STARTED);
    if (__atomic_load_n(&job->state, __ATOMIC_ACQUIRE) == RBX_STARTER_OVER && job->error) {
        errno = job->error;
        return -1;
    }
    return job->pid;
}

void rbx_starter_stacks_left(rbx_starter_job *job)
{
    __atomic_store_n(&job->stacks_left, 1, __ATOMIC_RELEASE);
}

void rbx_starter_started(rbx_starter_job *job)
{
    set_and_wake(&job->state, RBX_STARTER_STARTED);
}

bool rbx_starter_end(rbx_starter_job *job, int timeout_ms)
{
    if (timeout_ms >= 0)
        return wait_until_for(&job->state, RBX_STARTER_OVER, timeout_ms);
    wait_until(&job->state, RBX_STARTER_OVER);
    return true;
}

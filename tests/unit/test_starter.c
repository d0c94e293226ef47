/* Unit tests of the starter threads (src/sandbox/starter.c): a child cloned
 * with rbx_clone3_call shares the caller's memory and runs on the stack it
 * was given; a failed clone says why; a job's asker goes on once the child
 * says it runs and its end waits until the child executed; starter threads
 * are kept and used again; a child killed before it left its stacks leaves
 * the thread with new ones. */
#include "unit_util.h"
#include "sandbox/starter.h"

#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>

static int shared_word;

static int write_and_exit(void *arg)
{
    shared_word = *(int *)arg;
    int here;
    /* Its frame is on the stack it was given (64 KB above its argument). */
    uintptr_t at = (uintptr_t)&here, base = (uintptr_t)arg;
    return at > base && at < base + 64 * 1024 ? 7 : 9;
}

static void a_clone3_call_child_shares_memory_and_runs_on_its_stack(void **state)
{
    (void)state;
    size_t size = 64 * 1024;
    char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(stack != MAP_FAILED);
    /* The argument at the stack's base: every frame of the child is above it. */
    int *value = (int *)stack;
    *value = 4242;
    struct clone_args args = {.flags = CLONE_VM | CLONE_VFORK,
                              .exit_signal = SIGCHLD,
                              .stack = (uintptr_t)stack,
                              .stack_size = size};
    shared_word = 0;
    long pid = rbx_clone3_call(&args, write_and_exit, value);
    assert_true(pid > 0);
    int status;
    assert_int_equal(waitpid((pid_t)pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 7);
    assert_int_equal(shared_word, 4242); /* written in our memory, not a copy */
    munmap(stack, size);
}

static void a_failed_clone3_call_says_why(void **state)
{
    (void)state;
    /* CLONE_THREAD without CLONE_SIGHAND: the kernel refuses it. */
    struct clone_args args = {.flags = CLONE_THREAD, .exit_signal = 0};
    errno = 0;
    assert_int_equal(rbx_clone3_call(&args, write_and_exit, NULL), -1);
    assert_int_equal(errno, EINVAL);
}

/* A child like a sandbox's init: says it runs, waits for the asker's word,
 * then executes a program (or dies, with word 'k'). */
typedef struct fake_init {
    rbx_starter_job *job;
    int go[2];
    pid_t starter_tid;
    rbx_starter_stacks stacks;
    bool leave_stacks;
} fake_init;

static int fake_init_main(void *arg)
{
    fake_init *init = arg;
    rbx_starter_started(init->job);
    char word = 0;
    if (read(init->go[0], &word, 1) != 1 || word == 'k')
        return 3;
    if (init->leave_stacks)
        rbx_starter_stacks_left(init->job);
    char *argv[] = {"true", NULL}, *envp[] = {NULL};
    execve("/bin/true", argv, envp);
    return 127;
}

static pid_t clone_fake_init(rbx_starter_job *job, void *arg)
{
    fake_init *init = arg;
    init->job = job;
    init->starter_tid = (pid_t)syscall(SYS_gettid);
    rbx_starter_stacks stacks = init->stacks = rbx_starter_stacks_here();
    struct clone_args args = {.flags = CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID,
                              .parent_tid = (uintptr_t)&job->pid,
                              .exit_signal = SIGCHLD,
                              .stack = (uintptr_t)stacks.init,
                              .stack_size = stacks.size};
    return (pid_t)rbx_clone3_call(&args, fake_init_main, init);
}

static pid_t run_job(fake_init *init, char word, int *exit_code)
{
    rbx_starter_job job;
    assert_int_equal(pipe2(init->go, O_CLOEXEC), 0);
    pid_t pid = rbx_starter_begin(&job, clone_fake_init, init);
    assert_true(pid > 0);
    /* Started, and still waiting for our word: the job is not over. */
    assert_int_equal(__atomic_load_n(&job.state, __ATOMIC_ACQUIRE), RBX_STARTER_STARTED);
    /* Not over while it waits for the word, however long we look. */
    assert_false(rbx_starter_end(&job, 50));
    assert_int_equal(write(init->go[1], &word, 1), 1);
    assert_true(rbx_starter_end(&job, 10000));
    assert_int_equal(job.state, RBX_STARTER_OVER);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    close(init->go[0]);
    close(init->go[1]);
    return pid;
}

static void a_job_runs_on_a_starter_thread_that_is_kept(void **state)
{
    (void)state;
    fake_init first = {.leave_stacks = true}, second = {.leave_stacks = true};
    int code;
    run_job(&first, 'g', &code);
    assert_int_equal(code, 0); /* /bin/true ran */
    run_job(&second, 'g', &code);
    assert_int_equal(code, 0);
    assert_true(first.starter_tid != (pid_t)syscall(SYS_gettid));
    assert_int_equal(second.starter_tid, first.starter_tid); /* the same thread again */
}

static void a_child_that_never_left_its_stacks_leaves_new_ones(void **state)
{
    (void)state;
    fake_init killed = {.leave_stacks = false}, next = {.leave_stacks = true};
    int code;
    run_job(&killed, 'k', &code);
    assert_int_equal(code, 3);
    /* The thread is kept (the next job runs on it), its stacks are not. */
    run_job(&next, 'g', &code);
    assert_int_equal(code, 0);
    assert_int_equal(next.starter_tid, killed.starter_tid);
    assert_ptr_not_equal(next.stacks.init, killed.stacks.init);
    /* And a child that left them leaves them to the next. */
    fake_init again = {.leave_stacks = true};
    run_job(&again, 'g', &code);
    assert_ptr_equal(again.stacks.init, next.stacks.init);
}

int main(void)
{
    if (!rbx_starter_supported()) {
        printf("starters are not built for this architecture\n");
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_clone3_call_child_shares_memory_and_runs_on_its_stack),
        cmocka_unit_test(a_failed_clone3_call_says_why),
        cmocka_unit_test(a_job_runs_on_a_starter_thread_that_is_kept),
        cmocka_unit_test(a_child_that_never_left_its_stacks_leaves_new_ones),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

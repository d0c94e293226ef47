/* Unit tests of base/workers.c: jobs run on threads that earlier jobs
 * left waiting, never wait behind a busy thread, and an idle set of
 * workers ends its threads. */
#include "unit_util.h"

#include "runbox.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>

/* A job that records its thread and says when it is over. */
typedef struct probe {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    pid_t tid;
    bool over;
    bool hold;         /* wait until released */
    bool *release;     /* shared by the held ones */
} probe;

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_changed = PTHREAD_COND_INITIALIZER;

static void record(void *arg)
{
    probe *p = arg;
    if (p->hold) {
        pthread_mutex_lock(&held_lock);
        while (!*p->release)
            pthread_cond_wait(&held_changed, &held_lock);
        pthread_mutex_unlock(&held_lock);
    }
    pthread_mutex_lock(&p->lock);
    p->tid = (pid_t)syscall(SYS_gettid);
    p->over = true;
    pthread_cond_broadcast(&p->changed);
    pthread_mutex_unlock(&p->lock);
}

static void probe_init(probe *p)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->changed, NULL);
}

static void wait_over(probe *p)
{
    pthread_mutex_lock(&p->lock);
    while (!p->over)
        pthread_cond_wait(&p->changed, &p->lock);
    pthread_mutex_unlock(&p->lock);
}

static void probe_destroy(probe *p)
{
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->changed);
}

/* Jobs that hold their threads until release_held(). */
static bool held_released;

static void start_held(rbx_workers *w, probe *held, int n)
{
    held_released = false;
    for (int i = 0; i < n; i++) {
        probe_init(&held[i]);
        held[i].hold = true;
        held[i].release = &held_released;
        assert_int_equal(rbx_workers_run(w, record, &held[i]), 0);
    }
}

static void release_held(void)
{
    pthread_mutex_lock(&held_lock);
    held_released = true;
    pthread_cond_broadcast(&held_changed);
    pthread_mutex_unlock(&held_lock);
}

/* The threads of this process, from /proc, past those it had before the
 * test (the test's own, and a sanitizer's). */
static int base_threads;

static int all_threads(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static int thread_count(void)
{
    return all_threads() - base_threads;
}

static void pause_ms(long ms)
{
    struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* A thread that has ended may show in /proc for a moment after. */
static void assert_threads_become(int n)
{
    for (int i = 0; i < 400 && thread_count() != n; i++)
        pause_ms(5);
    assert_int_equal(thread_count(), n);
}

/* Runs a job, then, once the first's thread has gone back to waiting
 * (idle_ms long: the ~200 ms a slow machine may take) or has ended (idle_ms
 * short: until none is left), another; the threads they ran on. */
static void two_jobs(int idle_ms, pid_t tids[2])
{
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(4, idle_ms);
    assert_non_null(w);
    probe jobs[2];
    for (int i = 0; i < 2; i++) {
        probe_init(&jobs[i]);
        if (i == 1 && idle_ms > 1000)
            pause_ms(200);
        else if (i == 1)
            assert_threads_become(0);
        assert_int_equal(rbx_workers_run(w, record, &jobs[i]), 0);
        wait_over(&jobs[i]);
        tids[i] = jobs[i].tid;
    }
    rbx_workers_free(w);
    assert_threads_become(0); /* freed: none of its threads is left */
    for (int i = 0; i < 2; i++)
        probe_destroy(&jobs[i]);
}

static void test_a_job_after_another_runs_on_the_thread_the_first_left_waiting(void **state)
{
    (void)state;
    pid_t tids[2];
    two_jobs(10000, tids);
    assert_int_equal(tids[1], tids[0]);
    assert_int_not_equal(tids[0], (pid_t)syscall(SYS_gettid));
}

static void test_a_job_never_waits_behind_a_busy_thread(void **state)
{
    (void)state;
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(4, 10000);
    assert_non_null(w);
    probe held[3], free_one;
    start_held(w, held, 3);
    /* Three threads busy: a fourth job gets a thread of its own and ends
     * while they still wait. */
    probe_init(&free_one);
    assert_int_equal(rbx_workers_run(w, record, &free_one), 0);
    wait_over(&free_one);
    for (int i = 0; i < 3; i++)
        assert_false(held[i].over);
    release_held();
    pid_t tids[4] = {free_one.tid};
    for (int i = 0; i < 3; i++) {
        wait_over(&held[i]);
        tids[i + 1] = held[i].tid;
    }
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            assert_int_not_equal(tids[i], tids[j]);
    rbx_workers_free(w);
    for (int i = 0; i < 3; i++)
        probe_destroy(&held[i]);
    probe_destroy(&free_one);
}

static void test_threads_left_idle_end_and_a_later_job_gets_a_new_one(void **state)
{
    (void)state;
    pid_t tids[2];
    two_jobs(50, tids); /* the first's thread ends 50 ms after its job */
    assert_int_not_equal(tids[1], tids[0]);
}

static void test_no_more_than_max_idle_threads_wait(void **state)
{
    (void)state;
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(2, 10000);
    assert_non_null(w);
    probe held[5];
    start_held(w, held, 5);
    assert_int_equal(thread_count(), 5);
    release_held();
    for (int i = 0; i < 5; i++)
        wait_over(&held[i]);
    assert_threads_become(2); /* two wait, three ended */
    pause_ms(50);
    assert_int_equal(thread_count(), 2);
    rbx_workers_free(w);
    assert_threads_become(0);
    for (int i = 0; i < 5; i++)
        probe_destroy(&held[i]);
}

int main(void)
{
    base_threads = all_threads();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_job_after_another_runs_on_the_thread_the_first_left_waiting),
        cmocka_unit_test(test_a_job_never_waits_behind_a_busy_thread),
        cmocka_unit_test(test_threads_left_idle_end_and_a_later_job_gets_a_new_one),
        cmocka_unit_test(test_no_more_than_max_idle_threads_wait),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

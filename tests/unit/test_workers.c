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

static void test_a_job_after_another_runs_on_the_thread_the_first_left_waiting(void **state)
{
    (void)state;
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(4, 10000);
    assert_non_null(w);
    probe first, second;
    probe_init(&first);
    probe_init(&second);
    assert_int_equal(rbx_workers_run(w, record, &first), 0);
    wait_over(&first);
    /* The first job's thread is back waiting once it has looked for work:
     * microseconds; a slow machine gets far more. */
    pause_ms(200);
    assert_int_equal(rbx_workers_run(w, record, &second), 0);
    wait_over(&second);
    assert_int_equal(second.tid, first.tid);
    assert_int_not_equal(first.tid, (pid_t)syscall(SYS_gettid));
    rbx_workers_free(w);
    assert_threads_become(0); /* freed: none of its threads is left */
    probe_destroy(&first);
    probe_destroy(&second);
}

static void test_a_job_never_waits_behind_a_busy_thread(void **state)
{
    (void)state;
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(4, 10000);
    assert_non_null(w);
    bool release = false;
    probe held[3], free_one;
    for (int i = 0; i < 3; i++) {
        probe_init(&held[i]);
        held[i].hold = true;
        held[i].release = &release;
        assert_int_equal(rbx_workers_run(w, record, &held[i]), 0);
    }
    /* Three threads busy: a fourth job gets a thread of its own and ends
     * while they still wait. */
    probe_init(&free_one);
    assert_int_equal(rbx_workers_run(w, record, &free_one), 0);
    wait_over(&free_one);
    for (int i = 0; i < 3; i++)
        assert_false(held[i].over);
    pthread_mutex_lock(&held_lock);
    release = true;
    pthread_cond_broadcast(&held_changed);
    pthread_mutex_unlock(&held_lock);
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
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(4, 50);
    assert_non_null(w);
    probe first, later;
    probe_init(&first);
    probe_init(&later);
    assert_int_equal(rbx_workers_run(w, record, &first), 0);
    wait_over(&first);
    assert_threads_become(0); /* idle for 50 ms: ended */
    assert_int_equal(rbx_workers_run(w, record, &later), 0);
    wait_over(&later);
    assert_int_not_equal(later.tid, first.tid);
    rbx_workers_free(w);
    probe_destroy(&first);
    probe_destroy(&later);
}

static void test_no_more_than_max_idle_threads_wait(void **state)
{
    (void)state;
    assert_threads_become(0); /* an earlier test's may still be ending */
    rbx_workers *w = rbx_workers_new(2, 10000);
    assert_non_null(w);
    bool release = false;
    probe held[5];
    for (int i = 0; i < 5; i++) {
        probe_init(&held[i]);
        held[i].hold = true;
        held[i].release = &release;
        assert_int_equal(rbx_workers_run(w, record, &held[i]), 0);
    }
    assert_int_equal(thread_count(), 5);
    pthread_mutex_lock(&held_lock);
    release = true;
    pthread_cond_broadcast(&held_changed);
    pthread_mutex_unlock(&held_lock);
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

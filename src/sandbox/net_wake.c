/* runbox-net started on a sandbox's first frame (net.h).
 *
 * A network-on sandbox gets its tap at once (the program must see its
 * interface and route), but most programs never send a frame: names go to
 * runbox's resolver on the sandbox's own loopback, and a one-off `print`
 * never connects anywhere. Starting runbox-net for each of them cost a
 * process (exec, libslirp, its confinement) beside every program on the
 * way to its result, and one idle relay per prepared sandbox. Instead one
 * thread per runbox process waits on every idle tap (epoll) and starts
 * runbox-net for a tap when it becomes readable: its first frame (the ARP
 * for the gateway, before any connection) waits in the tap's queue
 * meanwhile, about a millisecond once per sandbox.
 *
 * Links are named in the epoll set by slot and generation, not by
 * pointer: a sandbox stopped while its wake-up is on its way is not
 * touched after it is freed. */
#include "sandbox/net.h"
#include "base/error.h"
#include "base/slot_table.h"

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

typedef struct rbx_net_link {
    int tap;      /* until runbox-net has it; -1 after */
    pid_t pid;    /* runbox-net, or -1 */
    int exit_fd;  /* closing it stops runbox-net, or -1 */
    bool waking;  /* runbox-net is being started, outside the lock */
    size_t slot;  /* in table */
} rbx_net_link;

/* The lock guards the table and every link's fields; it is never held
 * while runbox-net starts (a process spawn, about 0.3 ms), so other
 * sandboxes' starts and stops do not wait for one another's wake-ups. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t woken = PTHREAD_COND_INITIALIZER;
static rbx_slot_table table = RBX_SLOT_TABLE_INIT; /* of links */
static int epfd = -1;
static int thread_error;
static pthread_once_t started = PTHREAD_ONCE_INIT;

/* Under lock: the link an event names, if its slot still holds it and its
 * tap is still waiting: marked waking, its tap taken for the caller. */
static rbx_net_link *claim(uint64_t event, int *tap)
{
    rbx_slot *slot = rbx_slot_of(&table, event);
    if (!slot)
        return NULL;
    rbx_net_link *link = slot->item;
    if (link->tap < 0 || link->waking)
        return NULL;
    epoll_ctl(epfd, EPOLL_CTL_DEL, link->tap, NULL);
    *tap = link->tap;
    link->tap = -1;
    link->waking = true;
    return link;
}

/* runbox-net for the links whose taps spoke. A failure leaves the tap
 * without a relay: the sandbox's connections fail as on a dead network,
 * which the program sees; nothing else is at stake. A link being woken is
 * not freed meanwhile: rbx_net_helper_stop waits for it. */
static void wake(rbx_net_link **links, const int *taps, int n)
{
    pid_t pids[32];
    int exit_fds[32];
    for (int i = 0; i < n; i++) {
        if (rbx_net_relay_spawn(taps[i], &pids[i], &exit_fds[i]) != 0) {
            pids[i] = -1;
            exit_fds[i] = -1;
        }
        close(taps[i]); /* runbox-net holds it now */
    }
    pthread_mutex_lock(&lock);
    for (int i = 0; i < n; i++) {
        links[i]->pid = pids[i];
        links[i]->exit_fd = exit_fds[i];
        links[i]->waking = false;
    }
    pthread_cond_broadcast(&woken);
    pthread_mutex_unlock(&lock);
}

static void *watch(void *unused)
{
    (void)unused;
    struct epoll_event events[32];
    rbx_net_link *links[32];
    int taps[32];
    for (;;) {
        int n = epoll_wait(epfd, events, 32, -1);
        if (n < 0 && errno != EINTR)
            return NULL;
        int claimed = 0;
        pthread_mutex_lock(&lock);
        for (int i = 0; i < n; i++)
            if ((links[claimed] = claim(events[i].data.u64, &taps[claimed])))
                claimed++;
        pthread_mutex_unlock(&lock);
        if (claimed)
            wake(links, taps, claimed);
    }
}

static void start_thread(void)
{
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        thread_error = errno;
        return;
    }
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    thread_error = pthread_create(&thread, &attr, watch, NULL);
    pthread_attr_destroy(&attr);
    if (thread_error) {
        close(epfd);
        epfd = -1;
    }
}

rbx_status rbx_net_helper_start(int tap, rbx_net_helper *helper, rbx_error *err)
{
    helper->link = NULL;
    pthread_once(&started, start_thread);
    rbx_net_link *link = calloc(1, sizeof *link);
    if (epfd < 0 || !link) {
        free(link);
        close(tap);
        return rbx_fail(err, RBX_ESYSTEM, "cannot watch the sandbox's network: %s",
                        strerror(link ? thread_error : ENOMEM));
    }
    *link = (rbx_net_link){.tap = tap, .pid = -1, .exit_fd = -1};
    pthread_mutex_lock(&lock);
    long index = rbx_slot_take(&table, link, 0);
    int error = ENOMEM;
    if (index >= 0) {
        link->slot = (size_t)index;
        /* Level-triggered and one-shot: a frame already queued wakes it at
         * once, and only once. */
        struct epoll_event ev = {.events = EPOLLIN | EPOLLONESHOT,
                                 .data.u64 = rbx_slot_tag(&table, (size_t)index)};
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, tap, &ev) != 0) {
            error = errno;
            rbx_slot_give(&table, (size_t)index);
            index = -1;
        }
    }
    pthread_mutex_unlock(&lock);
    if (index < 0) {
        close(tap);
        free(link);
        return rbx_fail(err, RBX_ESYSTEM, "cannot watch the sandbox's network: %s",
                        strerror(error));
    }
    helper->link = link;
    return RBX_OK;
}

void rbx_net_helper_stop(rbx_net_helper *helper)
{
    rbx_net_link *link = helper->link;
    if (!link)
        return;
    helper->link = NULL;
    pthread_mutex_lock(&lock);
    while (link->waking) /* its runbox-net is starting: stopped once started */
        pthread_cond_wait(&woken, &lock);
    rbx_slot_give(&table, link->slot); /* a wake-up on its way finds another generation */
    if (link->tap >= 0)
        epoll_ctl(epfd, EPOLL_CTL_DEL, link->tap, NULL);
    pid_t pid = link->pid;
    int exit_fd = link->exit_fd;
    pthread_mutex_unlock(&lock);
    /* Outside the lock: closing the only descriptor of a tap detaches its
     * queue, which waits for an expedited RCU grace period (about a
     * millisecond here) that no other sandbox's start or stop should. */
    if (link->tap >= 0)
        close(link->tap);
    rbx_net_relay_stop(pid, exit_fd);
    free(link);
}

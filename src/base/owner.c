/* Whether the runbox process that made a leftover still runs (owner.h). */
#include "base/owner.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The start time of a process, in seconds since the epoch (0 if unknown):
 * field 22 of /proc/PID/stat, in clock ticks since boot (*ticks, as read);
 * *ended: it is a zombie (state Z or X), which runs no more whoever has yet
 * to reap it. */
static time_t process_started(pid_t pid, bool *ended, unsigned long long *ticks_out)
{
    *ended = false;
    *ticks_out = 0;
    char path[40], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    *ended = p && (p[1] == ' ') && (p[2] == 'Z' || p[2] == 'X');
    for (int field = 2; p && field < 22; field++)
        p = strchr(p + 1, ' ');
    struct timespec boot, real;
    long ticks = sysconf(_SC_CLK_TCK);
    if (!p || ticks <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0 ||
        clock_gettime(CLOCK_REALTIME, &real) != 0)
        return 0;
    unsigned long long started = strtoull(p + 1, NULL, 10);
    *ticks_out = started;
    return real.tv_sec - boot.tv_sec + (time_t)(started / (unsigned long long)ticks);
}

/* What one look at pid found. */
static rbx_owner_seen look(pid_t pid)
{
    rbx_owner_seen seen = {.pid = pid, .checked = time(NULL)};
    if (kill(pid, 0) != 0) {
        seen.state = errno == ESRCH ? RBX_OWNER_GONE : RBX_OWNER_UNKNOWN;
        return seen;
    }
    seen.state = RBX_OWNER_ALIVE;
    seen.started = process_started(pid, &seen.ended, &seen.ticks);
    return seen;
}

static rbx_owner_state verdict(const rbx_owner_seen *seen, unsigned long long start,
                               time_t made)
{
    if (seen->state != RBX_OWNER_ALIVE)
        return seen->state;
    /* The mark's start: the very process, or another of that pid. A start
     * that could not be read keeps the leftover (the next sweep looks). */
    if (start)
        return seen->ended || (seen->ticks && seen->ticks != start) ? RBX_OWNER_GONE
                                                                     : RBX_OWNER_ALIVE;
    /* A second of slack: start times are rounded down to clock ticks. */
    return seen->ended || (seen->started && seen->started > made + 1) ? RBX_OWNER_GONE
                                                                      : RBX_OWNER_ALIVE;
}

rbx_owner_state rbx_owner_state_of(pid_t pid, time_t made)
{
    if (pid <= 0)
        return RBX_OWNER_UNKNOWN;
    rbx_owner_seen seen = look(pid);
    return verdict(&seen, 0, made);
}

static rbx_owner_state state_memo(rbx_owner_memo *memo, pid_t pid, unsigned long long start,
                                  time_t made)
{
    if (pid <= 0)
        return RBX_OWNER_UNKNOWN;
    if (!memo) {
        rbx_owner_seen seen = look(pid);
        return verdict(&seen, start, made);
    }
    size_t i = 0;
    while (i < memo->count && memo->seen[i].pid != pid)
        i++;
    /* A pid found gone (or its process ended) may be another process's by
     * now: what it made since that look is looked at again. Any other
     * verdict only keeps what it judges, and stands. */
    if (i < memo->count) {
        rbx_owner_state known = verdict(&memo->seen[i], start, made);
        if (known != RBX_OWNER_GONE || made + 1 < memo->seen[i].checked)
            return known;
    }
    rbx_owner_seen seen = look(pid);
    if (i < memo->count)
        memo->seen[i] = seen;
    else if (memo->count < RBX_OWNER_MEMO_MAX)
        memo->seen[memo->count++] = seen;
    return verdict(&seen, start, made);
}

rbx_owner_state rbx_owner_state_memo(rbx_owner_memo *memo, pid_t pid, time_t made)
{
    return state_memo(memo, pid, 0, made);
}

rbx_owner_state rbx_owner_state_id(rbx_owner_memo *memo, const rbx_owner_id *id, time_t made)
{
    return state_memo(memo, id->pid, id->start, made);
}

/* This process's mark, made again in a child of a fork (its pid differs). */
static pthread_mutex_t mark_lock = PTHREAD_MUTEX_INITIALIZER;
static char mark[48];
static pid_t mark_pid;
static unsigned long long mark_start; /* 0: unreadable */

const char *rbx_owner_mark(void)
{
    pid_t self = getpid();
    pthread_mutex_lock(&mark_lock);
    if (mark_pid != self) {
        bool ended;
        (void)process_started(self, &ended, &mark_start);
        /* Unreadable (no /proc): the pid alone, judged as an older mark. */
        if (mark_start)
            snprintf(mark, sizeof mark, "%d-s%llu", (int)self, mark_start);
        else
            snprintf(mark, sizeof mark, "%d", (int)self);
        mark_pid = self;
    }
    pthread_mutex_unlock(&mark_lock);
    return mark;
}

unsigned long long rbx_owner_start(void)
{
    (void)rbx_owner_mark(); /* made for this process */
    pthread_mutex_lock(&mark_lock);
    unsigned long long start = mark_start;
    pthread_mutex_unlock(&mark_lock);
    return start;
}

bool rbx_owner_parse(const char *text, rbx_owner_id *id)
{
    char *end;
    *id = (rbx_owner_id){0};
    if (*text < '0' || *text > '9')
        return false;
    long pid = strtol(text, &end, 10);
    if (pid <= 0 || pid > 4194304 || (*end != '-' && *end != 0))
        return false;
    id->pid = (pid_t)pid;
    /* "-s<start>" next, ending there or at a '-': a mark of its own start. */
    if (end[0] == '-' && end[1] == 's' && end[2] >= '0' && end[2] <= '9') {
        char *after;
        unsigned long long start = strtoull(end + 2, &after, 10);
        if (start && (*after == '-' || *after == 0))
            id->start = start;
    }
    return true;
}

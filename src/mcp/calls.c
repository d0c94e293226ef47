/* Tool calls run on worker threads, MCP_MAX_CALLS at once, so the reader
 * keeps answering ping and cancel while code runs; later calls wait in a
 * queue. Workers start when calls need them (an MCP session over HTTP that
 * runs nothing costs no thread) and stay until the session ends. Every
 * call not yet answered is tracked by its request id: a
 * notifications/cancelled drops a waiting call, or kills a running one
 * through its cancel pipe (the engine watches it as request.cancel_fd),
 * and in both cases no response is sent. */
#include "mcp/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How long stopping waits for workers whose executions were cancelled; an
 * install of requirements is shared and does not stop for one caller. */
#define STOP_WAIT_S 10

typedef struct tracked_call {
    mcp_call call;
    struct tracked_call *next;
    bool running;
    int cancel_write; /* the write end of call.cancel_fd's pipe */
} tracked_call;

struct mcp_calls {
    rbx_engine *engine;
    mcp_output *output;
    json_t *tools;
    pthread_mutex_t lock;
    pthread_cond_t work;
    tracked_call *calls; /* every call not yet answered, in arrival order */
    size_t waiting;      /* how many of them have not started */
    bool stopping;
    size_t worker_count;
    size_t idle;     /* workers waiting for a call */
    mcp_turns turns; /* take NULL: the calls have the host to themselves */
    pthread_t workers[MCP_MAX_CALLS];
};

static void call_free(tracked_call *tracked)
{
    json_decref(tracked->call.id);
    json_decref(tracked->call.arguments);
    json_decref(tracked->call.progress_token);
    close(tracked->call.cancel_fd);
    close(tracked->cancel_write);
    free(tracked);
}

/* Takes the call out of the list; the caller holds the lock. */
static void unlink_call(mcp_calls *calls, tracked_call *tracked)
{
    for (tracked_call **at = &calls->calls; *at; at = &(*at)->next)
        if (*at == tracked) {
            *at = tracked->next;
            return;
        }
}

static tracked_call *find_call(mcp_calls *calls, const json_t *id)
{
    for (tracked_call *tracked = calls->calls; tracked; tracked = tracked->next)
        if (json_equal(tracked->call.id, id))
            return tracked;
    return NULL;
}

/* Kills a running call's execution and marks it so nothing more is sent
 * for it; the caller holds the lock. */
static void cancel_running(tracked_call *tracked)
{
    atomic_store(&tracked->call.cancelled, true);
    (void)!write(tracked->cancel_write, "x", 1);
}

/* The next call to run, or NULL when the server stops. */
static tracked_call *next_call(mcp_calls *calls)
{
    pthread_mutex_lock(&calls->lock);
    calls->idle++;
    while (!calls->stopping && !calls->waiting)
        pthread_cond_wait(&calls->work, &calls->lock);
    calls->idle--;
    tracked_call *tracked = NULL;
    if (!calls->stopping) {
        for (tracked = calls->calls; tracked->running; tracked = tracked->next)
            ;
        tracked->running = true;
        calls->waiting--;
    }
    pthread_mutex_unlock(&calls->lock);
    return tracked;
}

/* Runs a call, after waiting for its turn when code runs and turns are
 * shared. */
static json_t *run_call(mcp_calls *calls, mcp_call *call)
{
    bool turn = calls->turns.take && call->tool->kind == MCP_TOOL_EXECUTE;
    if (turn && !calls->turns.take(calls->turns.context, call))
        return rpc_error(call->id, RPC_SERVER_BUSY,
                         "Server busy: the server runs all the code it may at once and its "
                         "queue is full; retry when a call has finished");
    json_t *response = mcp_tool_run(calls->engine, calls->output, call);
    if (turn)
        calls->turns.give_back(calls->turns.context);
    return response;
}

static void *work(void *arg)
{
    mcp_calls *calls = arg;
    for (tracked_call *tracked; (tracked = next_call(calls));) {
        json_t *response = run_call(calls, &tracked->call);
        pthread_mutex_lock(&calls->lock);
        /* Once it is out of the list a cancel finds nothing: the response
         * is committed, and goes after the call's last progress. */
        bool cancelled = atomic_load(&tracked->call.cancelled);
        unlink_call(calls, tracked);
        pthread_mutex_unlock(&calls->lock);
        if (cancelled)
            json_decref(response);
        else
            mcp_output_send(calls->output, response);
        call_free(tracked);
    }
    return NULL;
}

mcp_calls *mcp_calls_start(rbx_engine *engine, mcp_output *output, json_t *tools)
{
    mcp_calls *calls = calloc(1, sizeof *calls);
    if (!calls)
        return NULL;
    *calls = (mcp_calls){.engine = engine, .output = output, .tools = tools};
    pthread_mutex_init(&calls->lock, NULL);
    pthread_cond_init(&calls->work, NULL);
    return calls;
}

void mcp_calls_share(mcp_calls *calls, const mcp_turns *turns)
{
    calls->turns = *turns;
}

/* One more worker when every one is busy; the caller holds the lock. The
 * sandbox's credentials are set with raw system calls (credentials.c), so
 * a thread being created while a sandbox is cloned does no harm. */
static bool add_worker(mcp_calls *calls)
{
    if (calls->idle >= calls->waiting || calls->worker_count == MCP_MAX_CALLS)
        return true;
    int rc = pthread_create(&calls->workers[calls->worker_count], NULL, work, calls);
    if (rc != 0) {
        fprintf(stderr, "runbox mcp: cannot start a worker thread: %s\n", strerror(rc));
        return calls->worker_count > 0; /* the call waits for a busy one */
    }
    calls->worker_count++;
    return true;
}

/* Adds an admitted call to the queue; the caller holds the lock. */
static void enqueue(mcp_calls *calls, json_t *id, const mcp_call *admitted)
{
    tracked_call *tracked = calloc(1, sizeof *tracked);
    int fds[2];
    if (!tracked || pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
        rpc_fail(calls->output, id, RPC_INTERNAL_ERROR, "Internal error: %s", strerror(errno));
        json_decref(admitted->arguments);
        json_decref(admitted->progress_token);
        free(tracked);
        return;
    }
    tracked->call = *admitted;
    tracked->call.id = json_incref(id);
    tracked->call.cancel_fd = fds[0];
    tracked->cancel_write = fds[1];
    tracked_call **at = &calls->calls;
    while (*at)
        at = &(*at)->next;
    *at = tracked;
    calls->waiting++;
    if (!add_worker(calls)) {
        *at = NULL;
        calls->waiting--;
        rpc_fail(calls->output, id, RPC_INTERNAL_ERROR, "Internal error: no thread for the call");
        call_free(tracked);
        return;
    }
    pthread_cond_signal(&calls->work);
}

void mcp_calls_accept(mcp_calls *calls, json_t *id, json_t *params, bool arguments_as_results)
{
    mcp_call call = {.cancel_fd = -1};
    pthread_mutex_lock(&calls->lock);
    /* Only this thread adds calls: what is checked here still holds below. */
    bool in_use = find_call(calls, id) != NULL, busy = calls->waiting >= MCP_MAX_WAITING;
    pthread_mutex_unlock(&calls->lock);
    if (in_use) {
        rpc_fail(calls->output, id, RPC_INVALID_REQUEST,
                 "Invalid Request: the id is already used by a call in progress");
        return;
    }
    if (busy) {
        rpc_fail(calls->output, id, RPC_SERVER_BUSY,
                 "Server busy: %d tool calls run and %d wait; retry when one has finished",
                 MCP_MAX_CALLS, MCP_MAX_WAITING);
        return;
    }
    if (!mcp_call_admit(calls->output, calls->tools, id, params, arguments_as_results, &call))
        return;
    pthread_mutex_lock(&calls->lock);
    enqueue(calls, id, &call);
    pthread_mutex_unlock(&calls->lock);
}

void mcp_calls_cancel(mcp_calls *calls, const json_t *request_id)
{
    pthread_mutex_lock(&calls->lock);
    tracked_call *dropped = find_call(calls, request_id);
    if (dropped && dropped->running) {
        cancel_running(dropped);
        dropped = NULL; /* its worker frees it */
    } else if (dropped) {
        unlink_call(calls, dropped);
        calls->waiting--;
    }
    pthread_mutex_unlock(&calls->lock);
    if (dropped)
        call_free(dropped);
}

/* Joins the workers within STOP_WAIT_S; false when one is still busy. */
static bool join_workers(mcp_calls *calls)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += STOP_WAIT_S;
    bool joined = true;
    for (size_t i = 0; i < calls->worker_count; i++)
        joined = pthread_timedjoin_np(calls->workers[i], NULL, &deadline) == 0 && joined;
    return joined;
}

bool mcp_calls_stop(mcp_calls *calls)
{
    tracked_call *dropped = NULL;
    pthread_mutex_lock(&calls->lock);
    calls->stopping = true;
    for (tracked_call **at = &calls->calls; *at;) {
        tracked_call *tracked = *at;
        if (tracked->running) {
            cancel_running(tracked);
            at = &tracked->next;
            continue;
        }
        *at = tracked->next;
        tracked->next = dropped;
        dropped = tracked;
    }
    calls->waiting = 0;
    pthread_cond_broadcast(&calls->work);
    pthread_mutex_unlock(&calls->lock);
    for (tracked_call *next; dropped; dropped = next) {
        next = dropped->next;
        call_free(dropped);
    }
    if (!join_workers(calls)) {
        /* Nothing is freed: the worker still uses it. On stdio the process
         * exits next, which ends the worker and its sandbox. */
        fprintf(stderr, "runbox mcp: a tool call did not stop within %d s\n", STOP_WAIT_S);
        return false;
    }
    pthread_mutex_destroy(&calls->lock);
    pthread_cond_destroy(&calls->work);
    free(calls);
    return true;
}

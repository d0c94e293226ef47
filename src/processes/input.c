/* A process's input (processes.h): its pseudo-terminal, whose master
 * runbox holds and whose slave is the program's controlling terminal, or
 * the pipe to its stdin. */
#include "base/error.h"
#include "processes/process.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

/* A pseudo-terminal: the master stays here, the slave goes to the sandbox
 * (opened through the master, not by a path in /dev/pts). */
rbx_status process_open_terminal(rbx_process *p, uint16_t cols, uint16_t rows, rbx_error *err)
{
    p->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (p->master < 0 || unlockpt(p->master) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open a pseudo-terminal: %s", strerror(errno));
    p->slave = ioctl(p->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
    struct winsize size = {.ws_row = rows, .ws_col = cols};
    if (p->slave < 0 || ioctl(p->master, TIOCSWINSZ, &size) != 0)
        return rbx_fail(err, RBX_ESYSTEM, "cannot open a pseudo-terminal: %s", strerror(errno));
    (void)fcntl(p->master, F_SETFL, O_NONBLOCK);
    return RBX_OK;
}

void process_take_input(rbx_process *p)
{
    pthread_mutex_lock(&p->write_lock);
    if (p->terminal)
        p->input_fd = fcntl(p->master, F_DUPFD_CLOEXEC, 3);
    else if (p->sandbox.stdin_fd >= 0)
        p->input_fd = fcntl(p->sandbox.stdin_fd, F_DUPFD_CLOEXEC, 3);
    close_fd(&p->sandbox.stdin_fd);
    pthread_mutex_unlock(&p->write_lock);
}

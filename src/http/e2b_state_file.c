/* The E2B listener's own state files (http.h): e2b-sandboxes.json and
 * e2b-contexts.json, each a JSON object written whole at every change. A
 * new file (mode 0600: the sandboxes' holds their access tokens) is synced
 * and renamed over the old one, so that a restarted server, or one killed
 * while writing, finds the last complete file. */
#include "http/http.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

json_t *e2b_state_load(const char *path, bool *absent, char *why, size_t why_size)
{
    *absent = false;
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (root)
        return root;
    if (access(path, F_OK) != 0 && errno == ENOENT)
        *absent = true;
    else
        snprintf(why, why_size, "cannot read %s: %s", path, error.text);
    return NULL;
}

bool e2b_state_save(const char *path, json_t *root)
{
    char temp[4200];
    snprintf(temp, sizeof temp, "%s.new", path);
    int fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    bool ok = fd >= 0 && root && json_dumpfd(root, fd, JSON_COMPACT) == 0 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    json_decref(root);
    ok = ok && rename(temp, path) == 0;
    if (!ok)
        unlink(temp);
    return ok;
}

/* Host-side file work that never follows a link a sandbox or an archive
 * planted: tree walks, opens beneath a directory, private directories,
 * locks; and host helper programs (mkfs, slirp4netns) started with
 * nothing of runbox's. */
#ifndef RBX_BASE_FSUTIL_H
#define RBX_BASE_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* fsutil.c: host-side tree walks that never follow a symbolic link. */
/* Removes name (a file or a whole tree) inside dirfd. */
int rbx_remove_tree(int dirfd, const char *name);
/* Adds up the allocated bytes of the tree at name inside dirfd. */
int rbx_tree_usage(int dirfd, const char *name, uint64_t *bytes);
/* Whether the tree at name inside dirfd was seen whole, at most entries_max
 * entries (itself counted) no deeper than counting goes, and nothing in
 * it changed (its ctime) at or after since. false where unsure. */
bool rbx_tree_unchanged_since(int dirfd, const char *name, time_t since, size_t entries_max);
/* Gives the directory name below dirfd back to runbox's user (0700), for a
 * removal that must enter a directory the sandbox locked (mode 000). Never
 * through a link: sandboxed code may swap one in after the open that found
 * the directory locked; a link there fails with ENOTDIR (or ELOOP) and
 * changes nothing. Returns 0, or -1 with errno. */
int rbx_unlock_dir_at(int dirfd, const char *name);
int rbx_mkdir_p(const char *path, mode_t mode);
/* Makes name below dirfd a directory of runbox's user alone (0700; one an
 * earlier runbox made more open is closed too) and opens it, never through
 * a link. Returns the descriptor, or -1 with errno. */
int rbx_private_dir_at(int dirfd, const char *name);
/* Copies the tree in src_dirfd into dst_dirfd: directories, regular files,
 * symbolic links (as links, never followed) and FIFOs, with their modes
 * (set-id bits dropped), owners and times; sockets and devices are left
 * out. Returns 0 or -1 with errno. */
int rbx_copy_tree(int src_dirfd, int dst_dirfd);
/* Opens path below dirfd only if it is a regular file (never through a
 * link at its end), without blocking whatever it turns out to be: FIFOs,
 * sockets and devices that a sandboxed program made fail with EINVAL. */
int rbx_open_regular(int dirfd, const char *path, int flags);
/* openat2() of path beneath dirfd (O_CLOEXEC added): "..", absolute
 * paths, links (at the end too), magic links and mount crossings fail, so
 * whatever sandboxed code or an archive planted cannot lead it elsewhere. */
int rbx_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* Whether a link at path ("a/b/link", relative to the top of a tree) to
 * target stays inside that tree when resolved by its text alone: an
 * absolute target from the top, a relative one from the link's directory.
 * An empty target does not. */
bool rbx_link_stays_inside(const char *path, const char *target);
/* Replaces whatever is at name below dirfd with a new file holding data:
 * a link planted there is removed, never followed. */
int rbx_write_new_file(int dirfd, const char *name, const void *data, size_t len);
/* dirfd's ".lock" (made if need be), locked exclusively for the caller,
 * who unlocks with rbx_lock_release; -1 when it cannot be opened.
 * What runbox processes sharing a directory serialise their changes on. */
int rbx_lock_dir(int dirfd);
/* Gives up the flock(2) held on fd, then closes fd (nothing when fd < 0).
 * The unlock comes first: a sandbox's init cloned while the lock was held
 * shares the open file, and holds the lock until it gets to close its
 * copy, which on a loaded host can come after the next caller looks. Not
 * for a descriptor duplicated on purpose: its copies would lose the lock. */
void rbx_lock_release(int fd);
/* All of len bytes to fd (retrying short writes and EINTR); -1 with errno. */
int rbx_write_all(int fd, const void *data, size_t len);
/* One write(2) to a pipe whose reader may be gone: EPIPE then, never
 * SIGPIPE (runbox keeps the default action, which its sandboxes inherit).
 * The signal is blocked in the calling thread for the write, and one the
 * write raised is taken before it is unblocked. */
ssize_t rbx_write_nosignal(int fd, const void *data, size_t len);
/* All of len bytes from fd (retrying short reads and EINTR); -1 with errno,
 * EIO when the file ends first. */
int rbx_read_all(int fd, void *data, size_t len);
/* The number a small file (a sysctl, a cgroup's counter) starts with:
 * 0, or -1 where it cannot be read or does not start with one. */
int rbx_read_number(const char *path, long long *value);
/* The same for a counter (a cgroup's bytes): 0 when it cannot be read. */
uint64_t rbx_read_count(const char *path);

/* The path of runbox's program NAME (runbox-net, runbox-init) beside the
 * running one, as they are built and installed; 0, or -1 with "" in path. */
int rbx_program_beside(const char *name, char *path, size_t size);
/* Starts a host helper program (mkfs, runbox-net) with stdio on /dev/null
 * and each pass[i] as its fd 3 + i. Returns posix_spawn's error, 0 on success. */
int rbx_spawn_helper(const char *path, char *const argv[], char *const envp[], const int *pass,
                     size_t pass_count, pid_t *pid);

#endif

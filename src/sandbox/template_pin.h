/* Prepared mount namespaces pinned in the state directory, so that every
 * runbox process on it uses one instead of building its own: a CLI run is
 * one execution, and building the namespace (the /usr overlay, copies of
 * /etc's files) costs it more than the execution. A namespace outlives its
 * processes while its nsfs file is bind-mounted somewhere: here, on a file
 * in <state>/templates (itself a private bind mount, since the kernel
 * refuses such mounts where they would propagate). The host's mount table
 * gains those two lines per state directory, whatever the load. */
#ifndef RBX_TEMPLATE_PIN_H
#define RBX_TEMPLATE_PIN_H

#include <stdbool.h>
#include <stdint.h>

/* The pinned namespace named name in dir, opened; -1 when there is none
 * (or what is there is not a mount namespace). */
int rbx_template_pin_open(const char *dir, const char *name);

/* Serializes the builders of dir's namespaces across processes: returns a
 * lock fd to close when done, or -1 (then build without it). */
int rbx_template_pin_lock(const char *dir);

/* Pins ns_fd as dir/name. Returns 0, or -1 with errno. */
int rbx_template_pin(const char *dir, const char *name, int ns_fd);

/* Unpins the namespaces in dir that kept (a pin's name) replaces
 * (rbx_template_name_replaced); with kept NULL every one, and the
 * directory's own private mount. Processes that hold one keep it. */
void rbx_template_unpin(const char *dir, const char *kept);

/* The <root> part of a pin's or a kept plan's name: a digest of the
 * image's tree (NULL or "": the host's paths). */
uint64_t rbx_template_root_digest(const char *tree);

/* Whether the entry name ("<kind>-<stamp>-<root>-<build>", a pin's or a
 * kept plan's) is one that kept, of the same kind, replaces: of another
 * stamp (the host's system paths changed since), or another build's of
 * kept's root (an upgrade that left them as they were), or in an older
 * form of name. */
bool rbx_template_name_replaced(const char *name, const char *kept);

#endif

/* A root's plan (mount.h), kept in the state directory for the next runbox
 * process. Finding where each system path of an image is, and what it is,
 * takes a few hundred system calls: 0.38 ms of every cold `runbox run`,
 * whose pinned namespace (template_pin.h) then makes the plan's steps
 * unused. The caller names the entry after everything the plan is made
 * from, so an entry is never stale, only unused. */
#ifndef RBX_PLAN_CACHE_H
#define RBX_PLAN_CACHE_H

#include "sandbox/mount.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define RBX_PLAN_CACHE_NAME_MAX 64

/* The entry's name: "plan-<stamp>-<root>-<key>", root a digest of the
 * image's tree (NULL: the host's), key one of the plan's other inputs: the
 * home's size, this build, runbox-init's file and the kernel (which /proc
 * entries exist). */
void rbx_plan_cache_name(char out[RBX_PLAN_CACHE_NAME_MAX], time_t stamp, const char *tree,
                         size_t home_size_mb);

/* The plan kept as dir/name: false when there is none, or what is there
 * is not a plan this build wrote (its size, its header, a count or a path
 * out of bounds, an owner other than ours, writable by others). */
bool rbx_plan_cache_load(const char *dir, const char *name, rbx_root_plan *plan);

/* Keeps plan as dir/name (written whole, then renamed into place), and
 * removes the entries of other stamps (the host's system paths changed
 * since they were made) and the others of its root (another build's):
 * one entry a root. Best effort: a failure only costs the next process
 * the plan's making. */
void rbx_plan_cache_store(const char *dir, const char *name, const rbx_root_plan *plan);

#endif

/* A table of slots that name things by index and generation: what an
 * epoll set (or any late event) holds instead of a pointer, so that an
 * event for a thing freed meanwhile finds an empty slot, or another
 * generation, and touches nothing. Free slots are on a free list: taking
 * and giving back cost the same however many slots are taken. Not
 * thread-safe: its owner's lock guards it. */
#ifndef RBX_SLOT_TABLE_H
#define RBX_SLOT_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct rbx_slot {
    void *item;  /* NULL: free */
    int kind;    /* the owner's, with the item */
    uint32_t gen;
    size_t next_free;
} rbx_slot;

typedef struct rbx_slot_table {
    rbx_slot *slots;
    size_t count;
    size_t first_free;
} rbx_slot_table;

#define RBX_SLOT_TABLE_INIT {NULL, 0, SIZE_MAX}

/* A slot holding item (not NULL) of kind: its index, the table doubled
 * when none is free; -1 when out of memory. */
long rbx_slot_take(rbx_slot_table *table, void *item, int kind);
/* The slot free again, with a new generation. */
void rbx_slot_give(rbx_slot_table *table, size_t index);
/* The tag of a taken slot, for an epoll event's data. */
uint64_t rbx_slot_tag(const rbx_slot_table *table, size_t index);
/* The slot a tag names, if it still holds what it held then; else NULL. */
rbx_slot *rbx_slot_of(const rbx_slot_table *table, uint64_t tag);

#endif

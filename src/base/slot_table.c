/* A table of slots named by index and generation (slot_table.h). */
#include "base/slot_table.h"

#include <stdlib.h>

long rbx_slot_take(rbx_slot_table *table, void *item, int kind)
{
    if (table->first_free == SIZE_MAX) {
        size_t grown = table->count ? table->count * 2 : 64;
        rbx_slot *bigger = realloc(table->slots, grown * sizeof *bigger);
        if (!bigger)
            return -1;
        for (size_t i = table->count; i < grown; i++)
            bigger[i] = (rbx_slot){.next_free = i + 1 < grown ? i + 1 : SIZE_MAX};
        table->first_free = table->count;
        table->slots = bigger;
        table->count = grown;
    }
    size_t index = table->first_free;
    rbx_slot *slot = &table->slots[index];
    table->first_free = slot->next_free;
    slot->item = item;
    slot->kind = kind;
    return (long)index;
}

void rbx_slot_give(rbx_slot_table *table, size_t index)
{
    rbx_slot *slot = &table->slots[index];
    slot->item = NULL;
    slot->gen++;
    slot->next_free = table->first_free;
    table->first_free = index;
}

uint64_t rbx_slot_tag(const rbx_slot_table *table, size_t index)
{
    return (uint64_t)index << 32 | table->slots[index].gen;
}

rbx_slot *rbx_slot_of(const rbx_slot_table *table, uint64_t tag)
{
    size_t index = (size_t)(tag >> 32);
    uint32_t gen = (uint32_t)tag;
    if (index >= table->count || !table->slots[index].item || table->slots[index].gen != gen)
        return NULL;
    return &table->slots[index];
}

/* Unit tests of base/slot_table.c: slots named by index and generation, as
 * the resolver's and the network relay's epoll sets hold them. */
#include "unit_util.h"

#include "base/slot_table.h"

static void test_a_tag_names_its_item_until_the_slot_is_given_back(void **state)
{
    (void)state;
    rbx_slot_table table = RBX_SLOT_TABLE_INIT;
    int item = 7;
    long index = rbx_slot_take(&table, &item, 3);
    assert_true(index >= 0);
    uint64_t tag = rbx_slot_tag(&table, (size_t)index);
    rbx_slot *slot = rbx_slot_of(&table, tag);
    assert_non_null(slot);
    assert_ptr_equal(slot->item, &item);
    assert_int_equal(slot->kind, 3);
    rbx_slot_give(&table, (size_t)index);
    assert_null(rbx_slot_of(&table, tag));
    free(table.slots);
}

static void test_a_reused_slot_does_not_answer_to_its_old_tag(void **state)
{
    (void)state;
    rbx_slot_table table = RBX_SLOT_TABLE_INIT;
    int first = 1, second = 2;
    long index = rbx_slot_take(&table, &first, 0);
    uint64_t old = rbx_slot_tag(&table, (size_t)index);
    rbx_slot_give(&table, (size_t)index);
    long again = rbx_slot_take(&table, &second, 0);
    assert_int_equal(again, index); /* the free list gives the last freed first */
    assert_null(rbx_slot_of(&table, old));
    rbx_slot *slot = rbx_slot_of(&table, rbx_slot_tag(&table, (size_t)again));
    assert_non_null(slot);
    assert_ptr_equal(slot->item, &second);
    free(table.slots);
}

static void test_the_table_grows_and_keeps_what_it_holds(void **state)
{
    (void)state;
    rbx_slot_table table = RBX_SLOT_TABLE_INIT;
    enum { N = 1000 };
    static int items[N];
    uint64_t tags[N];
    for (int i = 0; i < N; i++) {
        long index = rbx_slot_take(&table, &items[i], i % 2);
        assert_true(index >= 0);
        tags[i] = rbx_slot_tag(&table, (size_t)index);
    }
    for (int i = 0; i < N; i += 2) /* every other one given back... */
        rbx_slot_give(&table, (size_t)(tags[i] >> 32));
    for (int i = 0; i < N; i++) {
        rbx_slot *slot = rbx_slot_of(&table, tags[i]);
        if (i % 2 == 0) {
            assert_null(slot);
        } else {
            assert_non_null(slot);
            assert_ptr_equal(slot->item, &items[i]);
        }
    }
    size_t count = table.count;
    for (int i = 0; i < N / 2; i++) /* ...and taken again without growing */
        assert_true(rbx_slot_take(&table, &items[0], 0) >= 0);
    assert_int_equal(table.count, count);
    free(table.slots);
}

static void test_a_tag_beyond_the_table_names_nothing(void **state)
{
    (void)state;
    rbx_slot_table table = RBX_SLOT_TABLE_INIT;
    assert_null(rbx_slot_of(&table, 0));
    assert_null(rbx_slot_of(&table, UINT64_MAX));
    int item;
    assert_true(rbx_slot_take(&table, &item, 0) >= 0);
    assert_null(rbx_slot_of(&table, (uint64_t)5000 << 32));
    free(table.slots);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_tag_names_its_item_until_the_slot_is_given_back),
        cmocka_unit_test(test_a_reused_slot_does_not_answer_to_its_old_tag),
        cmocka_unit_test(test_the_table_grows_and_keeps_what_it_holds),
        cmocka_unit_test(test_a_tag_beyond_the_table_names_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

/* libnftnl and libmnl, loaded on first use. Only a sandbox with the network
 * on and an egress policy with rules (egress/rules) speaks nftables, so
 * runbox does not link them: `runbox --version` and `runbox run
 * --no-network` never load them. A caller calls rbx_nft_load() before its
 * first call, then calls through the table, `rbx_nft->nftnl_rule_alloc()`,
 * whose members have the libraries' names and types. */
#ifndef RBX_BASE_NFT_LIB_H
#define RBX_BASE_NFT_LIB_H

#include "runbox.h"

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/object.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

/* The functions runbox calls, each one member of the table: X(library, name). */
#define RBX_NFT_FUNCTIONS(X) \
    X(mnl, mnl_cb_run) \
    X(mnl, mnl_nlmsg_batch_current) \
    X(mnl, mnl_nlmsg_batch_head) \
    X(mnl, mnl_nlmsg_batch_next) \
    X(mnl, mnl_nlmsg_batch_size) \
    X(mnl, mnl_nlmsg_batch_start) \
    X(mnl, mnl_nlmsg_batch_stop) \
    X(nftnl, nftnl_batch_begin) \
    X(nftnl, nftnl_batch_end) \
    X(nftnl, nftnl_chain_alloc) \
    X(nftnl, nftnl_chain_free) \
    X(nftnl, nftnl_chain_nlmsg_build_payload) \
    X(nftnl, nftnl_chain_set_s32) \
    X(nftnl, nftnl_chain_set_str) \
    X(nftnl, nftnl_chain_set_u32) \
    X(nftnl, nftnl_expr_alloc) \
    X(nftnl, nftnl_expr_set) \
    X(nftnl, nftnl_expr_set_str) \
    X(nftnl, nftnl_expr_set_u32) \
    X(nftnl, nftnl_expr_set_u8) \
    X(nftnl, nftnl_nlmsg_build_hdr) \
    X(nftnl, nftnl_obj_alloc) \
    X(nftnl, nftnl_obj_free) \
    X(nftnl, nftnl_obj_get_u64) \
    X(nftnl, nftnl_obj_nlmsg_build_payload) \
    X(nftnl, nftnl_obj_nlmsg_parse) \
    X(nftnl, nftnl_obj_set_str) \
    X(nftnl, nftnl_obj_set_u32) \
    X(nftnl, nftnl_rule_add_expr) \
    X(nftnl, nftnl_rule_alloc) \
    X(nftnl, nftnl_rule_free) \
    X(nftnl, nftnl_rule_nlmsg_build_payload) \
    X(nftnl, nftnl_rule_set_str) \
    X(nftnl, nftnl_rule_set_u32) \
    X(nftnl, nftnl_set_alloc) \
    X(nftnl, nftnl_set_elem_add) \
    X(nftnl, nftnl_set_elem_alloc) \
    X(nftnl, nftnl_set_elem_foreach) \
    X(nftnl, nftnl_set_elem_get) \
    X(nftnl, nftnl_set_elem_set) \
    X(nftnl, nftnl_set_elem_set_u32) \
    X(nftnl, nftnl_set_elems_nlmsg_build_payload) \
    X(nftnl, nftnl_set_elems_nlmsg_parse) \
    X(nftnl, nftnl_set_free) \
    X(nftnl, nftnl_set_nlmsg_build_payload) \
    X(nftnl, nftnl_set_set_str) \
    X(nftnl, nftnl_set_set_u32) \
    X(nftnl, nftnl_table_alloc) \
    X(nftnl, nftnl_table_free) \
    X(nftnl, nftnl_table_nlmsg_build_payload) \
    X(nftnl, nftnl_table_set_str) \
    X(nftnl, nftnl_table_set_u32)

struct rbx_nft_lib {
#define RBX_NFT_MEMBER(library, name) __typeof__(name) *name;
    RBX_NFT_FUNCTIONS(RBX_NFT_MEMBER)
#undef RBX_NFT_MEMBER
};

/* The shared objects loaded: the sonames runbox is built against. */
#define RBX_NFT_NFTNL "libnftnl.so.11"
#define RBX_NFT_MNL "libmnl.so.0"

/* Loads both once per process (any thread; later calls only look). RBX_OK,
 * or RBX_ESYSTEM with a message naming the library, why it did not load and
 * the package to install. */
rbx_status rbx_nft_load(rbx_error *err);

/* The table, once rbx_nft_load has returned RBX_OK; NULL before. */
extern const struct rbx_nft_lib *rbx_nft;

#endif

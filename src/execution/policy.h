#include "runbox.h"
/* The operator's policy hook: deny patterns per language, checked before a
 * request runs. This is a convenience for refusing the unmistakable (a
 * shell fork bomb, rm -rf /); isolation, not pattern matching, is the
 * security boundary. */
#ifndef RBX_POLICY_H
#define RBX_POLICY_H

typedef struct rbx_policy rbx_policy;

/* Loads a policy file: one rule per line, "LANGUAGE NAME REGEX" where
 * LANGUAGE is a runtime name or *, NAME a word, and REGEX a POSIX extended
 * regular expression (GNU \s \w allowed) that is the rest of the line.
 * '#' starts a comment line. */
rbx_policy *rbx_policy_load(const char *path, rbx_error *err);
void rbx_policy_free(rbx_policy *policy);
/* The name of the first rule of language (canonical) that code matches, or NULL. */
const char *rbx_policy_match(const rbx_policy *policy, const char *language, const char *code);
size_t rbx_policy_rule_count(const rbx_policy *policy);
/* A digest of the file's bytes as they were loaded (0 for no policy): a
 * process that loaded other rules is configured otherwise. */
uint64_t rbx_policy_digest(const rbx_policy *policy);

#endif

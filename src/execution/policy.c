/* Deny patterns. See policy.h. */
#include "execution/policy.h"
#include "base/error.h"
#include "runbox.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_MAX_RULES 256
#define POLICY_MAX_LINE 4096

typedef struct rule {
    char language[32]; /* canonical name, or "*" */
    char name[64];
    regex_t regex;
} rule;

struct rbx_policy {
    uint64_t digest; /* of the file's bytes */
    size_t count;
    rule rules[POLICY_MAX_RULES];
};

/* Cuts the word at *p (ending it with a NUL) and moves *p past the spaces
 * after it; returns the word, or NULL when nothing follows it. */
static char *next_word(char **p)
{
    while (isspace((unsigned char)**p))
        (*p)++;
    char *word = *p;
    while (**p && !isspace((unsigned char)**p))
        (*p)++;
    if (!**p)
        return NULL;
    *(*p)++ = 0;
    while (isspace((unsigned char)**p))
        (*p)++;
    return word;
}

/* Splits "LANGUAGE NAME REGEX"; returns false when a part is missing. */
static bool split_rule(char *line, char **language, char **name, char **pattern)
{
    char *p = line;
    if (!(*language = next_word(&p)) || !(*name = next_word(&p)))
        return false;
    *pattern = p;
    return **pattern != 0;
}

/* glibc's regcomp copies a repeated subexpression for every repetition
 * applied to it, so repetitions of repetitions multiply ("a++++...": 20 of
 * them took 1.3 GB to compile, 24 took 18 GB). Deny patterns need little
 * of that: a repetition may apply to something repeated once (such as
 * (-[rf]+ )+), not deeper; bounds stay within 64; groups within 16 levels. */
#define POLICY_MAX_BOUND 64
#define POLICY_MAX_GROUPS 16
#define POLICY_MAX_NESTING 2

/* The end of the bracket expression starting at p ("[...]", where "]"
 * right after "[" or "[^" and "[:class:]" are part of it). */
static const char *bracket_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '^')
        q++;
    if (*q == ']')
        q++;
    for (; *q && *q != ']'; q++)
        if (*q == '[' && (q[1] == ':' || q[1] == '.' || q[1] == '=')) {
            const char *close = strstr(q + 2, (char[]){q[1], ']', 0});
            if (close)
                q = close + 1;
        }
    return *q ? q : q - 1;
}

static const char *too_costly(const char *pattern)
{
    int inner[POLICY_MAX_GROUPS + 1] = {0}; /* deepest repetition inside each open group */
    int depth = 0, last = 0;                /* the last atom's repetition depth */
    for (const char *p = pattern; *p; p++) {
        if (*p == '\\' && p[1]) {
            p++;
            last = 0;
        } else if (*p == '[') {
            p = bracket_end(p);
            last = 0;
        } else if (*p == '(') {
            if (++depth > POLICY_MAX_GROUPS)
                return "groups nested deeper than 16";
            inner[depth] = 0;
            last = 0;
        } else if (*p == ')' && depth > 0) {
            last = inner[depth--];
            inner[depth] = inner[depth] > last ? inner[depth] : last;
        } else if (*p == '*' || *p == '+' || *p == '?' || *p == '{') {
            if (*p == '{') {
                char *end;
                for (const char *q = p + 1; *q && *q != '}'; q++)
                    if (*q >= '0' && *q <= '9' && strtol(q, &end, 10) > POLICY_MAX_BOUND)
                        return "a repetition bound over 64";
                const char *close = strchr(p, '}');
                p = close ? close : p + strlen(p) - 1;
            }
            if (++last > POLICY_MAX_NESTING)
                return "repetitions of repetitions nested too deep (such as a+++ or ((a+)+)+)";
            inner[depth] = inner[depth] > last ? inner[depth] : last;
        } else {
            last = 0;
        }
    }
    return NULL;
}

static rbx_status add_rule(rbx_policy *policy, char *line, const char *path, int number,
                           rbx_error *err)
{
    char *language, *name, *pattern;
    if (!split_rule(line, &language, &name, &pattern))
        return rbx_fail(err, RBX_EINVAL,
                        "%s:%d: expected 'LANGUAGE NAME REGEX' (LANGUAGE a language or *)", path,
                        number);
    const char *canonical = strcmp(language, "*") ? rbx_runtime_canonical(language) : "*";
    if (!canonical)
        return rbx_fail(err, RBX_EINVAL, "%s:%d: unknown language '%.32s'", path, number, language);
    if (policy->count == POLICY_MAX_RULES)
        return rbx_fail(err, RBX_EINVAL, "%s: more than %d rules", path, POLICY_MAX_RULES);
    const char *costly = too_costly(pattern);
    if (costly)
        return rbx_fail(err, RBX_EINVAL,
                        "%s:%d: the regular expression of rule %.64s has %s, which costs too much "
                        "to compile: write it without",
                        path, number, name, costly);
    rule *r = &policy->rules[policy->count];
    snprintf(r->language, sizeof r->language, "%s", canonical);
    snprintf(r->name, sizeof r->name, "%s", name);
    int rc = regcomp(&r->regex, pattern, REG_EXTENDED | REG_NOSUB | REG_NEWLINE);
    if (rc != 0) {
        char why[128];
        regerror(rc, &r->regex, why, sizeof why);
        return rbx_fail(err, RBX_EINVAL, "%s:%d: bad regular expression for rule %s: %s", path,
                        number, r->name, why);
    }
    policy->count++;
    return RBX_OK;
}

rbx_policy *rbx_policy_load(const char *path, rbx_error *err)
{
    FILE *file = fopen(path, "r");
    if (!file) {
        rbx_fail(err, RBX_EINVAL, "cannot read policy file %s: %s", path, strerror(errno));
        return NULL;
    }
    rbx_policy *policy = calloc(1, sizeof *policy);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int number = 0;
    rbx_status status = policy ? RBX_OK : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    if (policy)
        policy->digest = RBX_DIGEST_START;
    /* Whole lines, however long: a part of one must never be read as a rule. */
    while (status == RBX_OK && (len = getline(&line, &cap, file)) >= 0) {
        number++;
        policy->digest = rbx_digest_add(policy->digest, line, (size_t)len);
        if (len > POLICY_MAX_LINE || memchr(line, 0, (size_t)len)) {
            status = rbx_fail(err, RBX_EINVAL, "%s:%d: a line longer than %d bytes or with a NUL",
                              path, number, POLICY_MAX_LINE);
            break;
        }
        line[strcspn(line, "\r\n")] = 0;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p && *p != '#')
            status = add_rule(policy, p, path, number, err);
    }
    free(line);
    fclose(file);
    if (status != RBX_OK) {
        rbx_policy_free(policy);
        return NULL;
    }
    return policy;
}

uint64_t rbx_policy_digest(const rbx_policy *policy)
{
    return policy ? policy->digest : 0;
}

void rbx_policy_free(rbx_policy *policy)
{
    if (!policy)
        return;
    for (size_t i = 0; i < policy->count; i++)
        regfree(&policy->rules[i].regex);
    free(policy);
}

const char *rbx_policy_match(const rbx_policy *policy, const char *language, const char *code)
{
    if (!policy)
        return NULL;
    for (size_t i = 0; i < policy->count; i++) {
        const rule *r = &policy->rules[i];
        if (strcmp(r->language, "*") && strcmp(r->language, language))
            continue;
        if (regexec(&r->regex, code, 0, NULL, 0) == 0)
            return r->name;
    }
    return NULL;
}

size_t rbx_policy_rule_count(const rbx_policy *policy)
{
    return policy ? policy->count : 0;
}

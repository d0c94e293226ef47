/* Deny patterns. See policy.h. */
#include "policy.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POLICY_MAX_RULES 256

typedef struct rule {
    char language[32]; /* canonical name, or "*" */
    char name[64];
    regex_t regex;
} rule;

struct rbx_policy {
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
    char line[4096];
    int number = 0;
    rbx_status status = policy ? RBX_OK : rbx_fail(err, RBX_ESYSTEM, "out of memory");
    while (status == RBX_OK && fgets(line, sizeof line, file)) {
        number++;
        line[strcspn(line, "\r\n")] = 0;
        char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p && *p != '#')
            status = add_rule(policy, p, path, number, err);
    }
    fclose(file);
    if (status != RBX_OK) {
        rbx_policy_free(policy);
        return NULL;
    }
    return policy;
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

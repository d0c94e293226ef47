/* Percent-decoding for the front ends (percent.h). Strict where URLs are
 * read loosely elsewhere: a '%' without two hex digits is an error, not
 * a literal '%', so that what a client meant is never guessed. */
#include "api/percent.h"

#include <stddef.h>

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int api_percent_byte(const char *text)
{
    if (text[0] != '%')
        return -1;
    /* The second digit is read only after the first: "%" ends at its NUL. */
    int high = hex_value(text[1]), low = high < 0 ? -1 : hex_value(text[2]);
    return low < 0 ? -1 : high << 4 | low;
}

bool api_percent_decode(char *text)
{
    char *out = text;
    for (const char *in = text; *in; in++) {
        if (*in != '%') {
            *out++ = *in;
            continue;
        }
        int byte = api_percent_byte(in);
        if (byte <= 0)
            return false;
        *out++ = (char)byte;
        in += 2;
    }
    *out = 0;
    return true;
}

/* Whether a request may run, before anything of it does (request.c). */
#ifndef RBX_EXECUTION_REQUEST_H
#define RBX_EXECUTION_REQUEST_H

#include "languages/runtime.h"
#include "runbox.h"

#define RBX_CPUS_MIN 0.01 /* a hundredth of a core: 1 ms of CPU per 100 ms period */
rbx_status rbx_request_validate(const rbx_engine *engine, const rbx_request *request,
                                const rbx_runtime **runtime, double *timeout_s, rbx_error *err);
bool rbx_env_name_valid(const char *name, size_t len);

#endif

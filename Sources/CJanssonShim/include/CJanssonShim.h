#ifndef COURIER_CJANSSONSHIM_H
#define COURIER_CJANSSONSHIM_H

#include <jansson.h>

/*
 * json_typeof, json_incref and json_decref are macros or static inline
 * functions with macro arguments in jansson.h; these wrappers give Swift a
 * plain function for each. JSON_REAL_PRECISION is a macro with an argument.
 */

json_type courier_json_typeof(const json_t *value);
void courier_json_decref(json_t *value);
json_t *courier_json_incref(json_t *value);
size_t courier_json_real_precision(int digits);

#endif

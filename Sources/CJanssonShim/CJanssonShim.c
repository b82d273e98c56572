#include "CJanssonShim.h"

json_type courier_json_typeof(const json_t *value) { return json_typeof(value); }
void courier_json_decref(json_t *value) { json_decref(value); }
size_t courier_json_real_precision(int digits) { return JSON_REAL_PRECISION(digits); }
json_t *courier_json_incref(json_t *value) { return json_incref(value); }

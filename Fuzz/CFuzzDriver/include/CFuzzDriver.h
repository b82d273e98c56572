#ifndef COURIER_CFUZZDRIVER_H
#define COURIER_CFUZZDRIVER_H

#include <stddef.h>
#include <stdint.h>

// libFuzzer's entry for programs that keep their own main. SwiftPM links an
// executable with main pointing at the module's @main (`--defsym`), so each
// harness's @main calls this. The harness also exports
// LLVMFuzzerTestOneInput, which libFuzzer's own main, linked in all the
// same, refers to. libFuzzer ships no header.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif

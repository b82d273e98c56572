// The declaration in include/CFuzzDriver.h is all this module holds; SwiftPM
// needs one source file to build it.
#include "CFuzzDriver.h"

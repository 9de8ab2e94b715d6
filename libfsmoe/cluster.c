/* being written */
#include "status.h"

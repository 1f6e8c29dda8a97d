// ir::parse lives in ir/text.h; this header is the name the runtime includes.
#pragma once
#include "ir/text.h"

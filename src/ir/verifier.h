// ir::verify lives in ir/verify.h; this header is the name the runtime includes.
#pragma once
#include "ir/verify.h"

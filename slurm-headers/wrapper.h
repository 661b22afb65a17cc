/*
 * gputopo: the single translation unit bindgen parses (build.rs). One #include per
 * plugin role; the priority role adds "priority.h" here.
 */
#include "common.h"
#include "select.h"
#include "priority.h"
